"""What leaves the machine carries no absolute local path or host name: a package's
configs/<system>.json (built here by the package tests' fixtures, from a campaign record as
a real configuration writes it) and a tracker's config (a tradeoff point's TensorBoard
HParams, W&B's config): each setting keeps its name, its value relative to the repository
or redacted."""
from __future__ import annotations

import json

import pytest
from test_package import ORG, SYSTEM_NAME, make_campaign

from submission import package, tracking
from submission.config import resolve

from conftest import REPO

LOCAL_PATH, HOST = "<redacted: local path>", "<redacted: host>"

LOCAL = {"data_dir": "/srv/datasets/imagenet", "val_labels": "/srv/datasets/LOC_val_solution.csv",
         "master_addr": "node7.cluster.example.org", "cache_clear_cmd": "/usr/local/sbin/drop-caches --all",
         "cache_dir": "cache/imagenet"}


def test_a_packaged_config_names_no_local_path_or_host(tmp_path):
    results = tmp_path / "results"
    folder = make_campaign(results)
    record = json.loads((folder / "campaign.json").read_text())
    record["config"] = resolve("p4d", {**LOCAL, "org": ORG, "results_dir": str(results)}).to_dict()
    (folder / "campaign.json").write_text(json.dumps(record))
    built = package.build_package(results, [SYSTEM_NAME], ORG, tmp_path / "out", REPO)
    (configs,) = built.path.glob("benchmarks/resnet/implementations/*/configs")
    text = (configs / f"{SYSTEM_NAME}.json").read_text()
    readme = (configs.parent / "README.md").read_text()
    for local in ("/srv", "/usr/local", "node7", str(tmp_path), str(REPO)):
        assert local not in text and local not in readme, local
    settings = json.loads(text)["config"]["settings"]
    assert settings["data_dir"] == settings["val_labels"] == settings["results_dir"] == LOCAL_PATH
    assert settings["master_addr"] == HOST
    assert settings["cache_clear_cmd"] == f"{LOCAL_PATH} --all"
    assert settings["cache_dir"] == "cache/imagenet" and settings["recipe"] == "mild"
    assert json.loads(text)["config"]["settings"].keys() == record["config"]["settings"].keys()


def test_a_loopback_rendezvous_and_a_path_inside_the_repository_are_kept_as_they_say():
    from submission.redaction import redacted_settings
    kept = redacted_settings({"master_addr": "127.0.0.1", "results_dir": str(REPO / "results" / "x"),
                              "price_source": "https://aws.amazon.com/ec2/pricing/ (2024-05)"})
    assert kept["master_addr"] == "127.0.0.1" and kept["results_dir"] == "results/x"
    assert kept["price_source"] == "https://aws.amazon.com/ec2/pricing/ (2024-05)"


def test_a_points_hparams_name_no_local_path(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import metadata
    folder = tmp_path / "events"
    tracking.write_point_hparams(folder, {"configuration": "mild", "data_dir": "/srv/datasets/imagenet",
                                          "master_addr": "node7.cluster.example.org"}, {"top1": 0.5})
    events = EventAccumulator(str(folder))
    events.Reload()
    start = metadata.parse_session_start_info_plugin_data(
        events.PluginTagToContent(metadata.PLUGIN_NAME)[metadata.SESSION_START_INFO_TAG])
    assert {k: v.string_value for k, v in start.hparams.items()} == {
        "configuration": "mild", "data_dir": LOCAL_PATH, "master_addr": HOST}


def test_the_wandb_config_names_no_local_path(tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="W&B is an optional extra: pip install -e '.[wandb]'")
    from submission.tracking import Target

    from wandb_records import offline_run
    monkeypatch.setenv("WANDB_MODE", "offline")
    target = Target(("wandb",), str(tmp_path / "tb"), str(tmp_path), "run_0", "g")
    opened = tracking.open_tracking(target, dict(resolve("cpu", LOCAL).settings), "[run 0]")
    opened.close()
    (run,) = [offline_run(folder) for folder in (tmp_path / "wandb").glob("offline-run-*")]
    assert run["config"]["data_dir"] == LOCAL_PATH and run["config"]["master_addr"] == HOST
