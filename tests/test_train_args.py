"""submission.train_args: the worker's command line, written by the campaign and a tradeoff and
read by the worker, as one type declared as the settings are; each value's text is its
Declaration's (`--cache-cleared false`, the --track target as JSON)."""
from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from submission import campaign
from submission.preflight import resolve_here
from submission.tracking import Target
from submission.train_args import TrainArgs

CONFIG, DATA = Path("results/local/config.json"), Path("results/local/data.json")
TARGET = Target(("tensorboard",), "results/local/tensorboard/run_2", "results/local", "run_2", "local_cpu_2c")


@pytest.mark.parametrize("args, argv", [
    (TrainArgs(CONFIG, DATA, run_index=2, runs=5, seed=17, remaining=0, progress=Path("p/run_2.jsonl"),
               track=TARGET, result=Path("r/result_2.txt"), cache_cleared=False),
     ["--config", str(CONFIG), "--data", str(DATA), "--run-index", "2", "--runs", "5", "--seed", "17",
      "--remaining", "0", "--progress", "p/run_2.jsonl", "--track", TARGET.to_text(),
      "--result", "r/result_2.txt", "--cache-cleared", "false"]),
    (TrainArgs(CONFIG, DATA, seed=3, label="[point 1/8 plain @0.5 seed 3]", progress=Path("progress.jsonl"),
               result=Path("log.txt"), cache_cleared=True),
     ["--config", str(CONFIG), "--data", str(DATA), "--seed", "3", "--label", "[point 1/8 plain @0.5 seed 3]",
      "--progress", "progress.jsonl", "--result", "log.txt", "--cache-cleared", "true"]),
    (TrainArgs(CONFIG, DATA, follow=True, state=Path("state.node1.json"), cache_cleared=False),
     ["--config", str(CONFIG), "--data", str(DATA), "--follow", "--state", "state.node1.json",
      "--cache-cleared", "false"]),
    (TrainArgs(CONFIG, DATA, finish=True), ["--config", str(CONFIG), "--data", str(DATA), "--finish"]),
], ids=["campaign run", "tradeoff point", "follower", "finish"])
def test_each_launch_is_written_in_its_order_and_read_back_as_written(args, argv):
    assert args.to_argv() == argv
    assert TrainArgs.parse(argv) == args


def test_what_a_command_line_leaves_out_is_read_as_not_given():
    args = TrainArgs.parse(["--data", "d.json", "--config", "c.json", "--seed", "4"])
    assert args == TrainArgs(Path("c.json"), Path("d.json"), seed=4)
    assert args.run_index is None and args.track is None and not args.follow and args.cache_cleared is None


def test_a_value_that_is_not_of_its_type_is_refused_by_the_one_parser(capsys):
    with pytest.raises(SystemExit):
        TrainArgs.parse(["--config", "c.json", "--data", "d.json", "--cache-cleared", "1"])
    assert "argument --cache-cleared: invalid" in capsys.readouterr().err


def test_the_worker_refuses_a_command_line_without_its_configuration(capsys):
    with pytest.raises(SystemExit):
        TrainArgs.parse(["--data", "d.json"])
    assert "the following arguments are required: --config" in capsys.readouterr().err


def test_the_dry_run_prints_run_1s_command_with_the_seed_to_be_drawn(tmp_path):
    config = resolve_here(None, {"results_dir": str(tmp_path), "runs": "3"})
    printed = next(line for line in campaign.dry_run(config).splitlines() if " -m submission.train " in line)
    folder = tmp_path / config.system_name
    assert printed.endswith(" -m submission.train " + " ".join(shlex.quote(part) for part in [
        "--config", str(folder / "config.json"), "--data", str(folder / "data.json"),
        "--run-index", "0", "--runs", "3", "--seed", "<seed>", "--result", str(folder / "resnet" / "result_0.txt")]))
