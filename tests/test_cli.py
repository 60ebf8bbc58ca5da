"""The command line answers bad input with what is wrong and what to do, and leaves nothing behind."""
import subprocess
import sys

import pytest

from submission import campaign, cli
from submission.config import ConfigError
from submission.options import BenchOptions, CheckOptions, TradeoffOptions, parse, words_of
from submission.preflight import resolve_here
from submission.setting_declaration import declarations

from conftest import REPO


@pytest.mark.parametrize("args, message", [
    (["trian"], "unknown command 'trian'"),
    (["RUN"], "unknown command 'RUN' (did you mean run?)"),
    (["runs=1", "run"], "'run' is a command: it comes first"),
    (["run", "prepare"], "'prepare' is a command: it comes first"),     # ./run_and_time.sh prepare
    (["compare", "results", "more"], "compare takes one results folder"),
])
def test_bad_commands_are_refused_with_what_to_do(capsys, args, message):
    assert cli.main(args) == 2
    assert message in capsys.readouterr().err


def test_describe_knows_the_rulesets_mlperf_logging_knows(capsys):
    assert cli.main(["describe", "ruleset=9.9"]) == 2
    err = capsys.readouterr().err
    assert "ruleset=9.9: give one of ruleset=0.6.0" in err and " ruleset=2.0.0, " in err and " ruleset=4.0.0, " in err


def test_the_old_flags_still_work_with_a_notice_naming_the_new_form(capsys):
    assert cli.main(["describe", "--ruleset", "9.9"]) == 2
    err = capsys.readouterr().err
    assert "note: --ruleset is now ruleset=VALUE" in err and "ruleset=9.9: give one of" in err


@pytest.mark.parametrize("verb", ["run", "prepare", "describe", "settings", "compare", "project", "bench",
                                  "score", "package", "report", "qualify", "tradeoff"])
def test_help_is_usage_not_an_error(capsys, verb):
    assert cli.main([verb, "--help"]) == 0
    out = capsys.readouterr().out
    assert f"python -m submission {verb}" in out
    assert f"options of {verb}" in out or f"{verb} has no options of its own" in out


@pytest.mark.parametrize("words", [["--help"], ["-h"], ["help"]])
def test_help_without_a_command_lists_every_command_with_what_it_does(capsys, words):
    assert cli.main(words) == 0
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    assert listed == list(cli.VERBS)
    assert "  score RESULTS_DIR" in out and "olympic score" in out and "COMMAND --help" in out
    assert "options of run" not in out


@pytest.mark.parametrize("verb", list(cli.VERBS))
def test_help_lists_every_option_of_the_verb_with_its_meaning(capsys, verb):
    """Each verb's options are its dataclass's declared fields; --help and `help VERB` list each."""
    declared = declarations(cli.VERBS[verb].options)
    for words in ([verb, "--help"], ["help", verb]):
        assert cli.main(words) == 0
        out = capsys.readouterr().out
        for name, option in declared.items():
            assert f"  {name}=  {option.meaning} (" in out, (verb, name)


def test_a_verb_receives_its_options_typed_and_checked(capsys, tmp_path):
    options, rest = parse("bench", BenchOptions, ["steps=4", "system=cpu", "quick=True", "--dry-run"])
    assert options == BenchOptions(steps=4, quick=True) and rest == ["system=cpu", "--dry-run"]
    options, _ = parse("check", CheckOptions, ["rulesets=2.0.0", "--ruleset", "4.0.0"])
    assert options.rulesets == "2.0.0,4.0.0"        # a comma list repeated adds to it
    assert capsys.readouterr().err.startswith("note: --ruleset is now rulesets=VALUE")
    options, _ = parse("tradeoff", TradeoffOptions, ["dp_efficiency=none", "point=2", "grid=embedded"])
    assert options.dp_efficiency is None and options.point == 2
    assert words_of(options) == ["grid=embedded", "point=2"]
    with pytest.raises(ConfigError, match=r"point=-1: give a whole number at least 0, e.g. point=VALUE"):
        parse("tradeoff", TradeoffOptions, ["point=-1"])


def test_help_with_a_command_gives_its_options(capsys):
    assert cli.main(["help", "score"]) == 0
    assert "options of score" in capsys.readouterr().out
    assert cli.main(["run", "--help"]) == 0         # ./run_and_time.sh --help
    assert "options of run" in capsys.readouterr().out


def test_compare_given_one_systems_folder_points_to_score(tmp_path, capsys):
    system = tmp_path / "local_cpu_2c"
    (system / "resnet").mkdir(parents=True)
    (system / "resnet" / "result_0.txt").write_text(":::MLLOG {}\n")
    assert cli.main(["compare", str(system)]) == 2
    err = capsys.readouterr().err
    assert f"python -m submission score {system}" in err and str(tmp_path) in err


def test_a_file_where_a_folder_belongs_is_named_with_advice(tmp_path, capsys):
    a_file = tmp_path / "taken"
    a_file.write_text("")
    assert cli.main(["prepare", "system=cpu", f"cache_dir={a_file}"]) == 1
    err = capsys.readouterr().err
    assert str(a_file) in err and "A file stands where a folder is needed" in err


@pytest.mark.e2e
@pytest.mark.parametrize("verb", ["--help", "settings"])
def test_a_reader_that_stops_early_is_not_an_error(verb):
    listing = subprocess.Popen([sys.executable, "-m", "submission", verb], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    listing.stdout.close()          # as `| head` does, here before anything is written
    assert listing.wait(timeout=120) == 141
    assert listing.stderr.read() == b""


def test_bench_is_a_verb_of_the_command_line(capsys):
    assert cli.main(["bench", "system=cpu", "sweep"]) == 2
    assert "sweep takes a value (sweep=...)" in capsys.readouterr().err


def test_a_campaign_that_fails_before_recording_leaves_no_results_folder(tmp_path):
    (tmp_path / "images" / "train").mkdir(parents=True)
    (tmp_path / "images" / "val").mkdir()
    results = tmp_path / "results"
    config = resolve_here("local", {"data_dir": str(tmp_path / "images"), "workers_per_device": "1", "device": "cpu",
                               "precision": "fp32",
                               "results_dir": str(results), "cache_dir": str(tmp_path / "cache")})
    with pytest.raises(ConfigError, match="train has no class folders"):
        campaign.run_campaign(config)
    assert not results.exists(), list(results.iterdir())

