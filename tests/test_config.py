"""Configuration: recipe + system descriptor + key=value overrides, resolved, in order of
precedence, and validated (each recipe's published values: test_recipes.py)."""
import json

import pytest

from submission import config
from submission.config import ConfigError, parse_overrides, resolve


def test_p4d_keeps_the_recipe_and_derives_the_launch():
    cfg = resolve("p4d")
    assert cfg.recipe == "mild" and cfg.target_accuracy == 0.759
    assert cfg.processes_per_node == 8 and cfg.device_type == "cuda"
    assert cfg.global_batch_size == 2048
    assert cfg.peak_lr == pytest.approx(2.048)


def test_learning_rate_scales_linearly_with_the_global_batch():
    cfg = resolve("p4d", {"batch_per_device": "128"})
    assert cfg.global_batch_size == 1024
    assert cfg.peak_lr == pytest.approx(1.024)


def test_mild_trains_28_whole_epochs_with_8_warmup_epochs():
    cfg = resolve("p4d")
    assert cfg.train_epochs == 28.0 and cfg.warmup_train_epochs == 8.0
    assert resolve("p4d", {"scale_warmup": "true"}).warmup_train_epochs == pytest.approx(2.56)
    assert resolve("p4d", {"whole_epochs": "false"}).train_epochs == pytest.approx(28.8)
    assert resolve("cpu").train_epochs == pytest.approx(0.16)     # never floored to 0


def test_weight_decay_keeps_its_published_decay_per_epoch_at_any_batch():
    published = resolve("p4d")
    assert published.effective_weight_decay == pytest.approx(5e-4)
    half = resolve("p4d", {"batch_per_device": "128"})
    steps_per_epoch_ratio = published.global_batch_size / half.global_batch_size
    # twice the steps per epoch, each decaying half as much
    assert half.effective_weight_decay * steps_per_epoch_ratio == pytest.approx(5e-4)


def test_numbers_in_any_notation_parse():
    cfg = resolve(None, {"weight_decay": "5e-4", "lr": "1E-1", "label_smoothing": ".1"})
    assert (cfg.weight_decay, cfg.lr, cfg.label_smoothing) == (5e-4, 0.1, 0.1)


def test_bf16_is_refused_on_v100_systems_and_allowed_on_a100():
    with pytest.raises(ConfigError, match="no bf16 tensor cores"):
        resolve("p3", {"amp_dtype": "bf16"})
    assert resolve("p4d", {"amp_dtype": "bf16"}).amp_dtype == "bf16"
    assert resolve("p3").amp_dtype == "fp16"


def test_recipe_files_are_type_checked(tmp_path, monkeypatch):
    from submission import names
    monkeypatch.setattr(names, "RECIPES_DIR", tmp_path)
    (tmp_path / "mild.yaml").write_text((config.REPO_ROOT / "submission/recipes/mild.yaml").read_text())
    (tmp_path / "odd.yaml").write_text("base: mild\nmomentum: fast\n")
    with pytest.raises(ConfigError, match=r"momentum takes a number, not 'fast' \(in .*odd.yaml\)"):
        config.load_recipe("odd")
    (tmp_path / "typo.yaml").write_text("base: mild\nmomentun: 0.9\n")
    with pytest.raises(ConfigError, match="unknown recipe setting 'momentun'"):
        config.load_recipe("typo")
    (tmp_path / "sci.yaml").write_text("base: mild\nweight_decay: 5e-5\n")
    assert config.load_recipe("sci")["weight_decay"] == 5e-5


def test_overrides_are_typed_and_the_command_line_wins():
    cfg = resolve(None, parse_overrides(["system=cpu", "runs=3", "lr=1.5", "package=false",
                                         "seeds=4,5,6"]))
    assert cfg.system_id == "cpu" and cfg.runs == 3 and cfg.lr == 1.5 and cfg.package is False
    assert cfg.seed_list == [4, 5, 6]


@pytest.mark.parametrize("overrides, message", [
    ({"lrr": "1"}, "unknown setting 'lrr'"),
    ({"lr": "fast"}, "lr takes a number"),
    ({"runs": "2.5"}, "runs takes a whole number"),
    ({"package": "maybe"}, "package takes true or false"),
    ({"seeds": "1,2"}, "seeds lists 2 seeds for runs=5"),
    ({"runs": "2", "seeds": "7,7"}, "seeds must be distinct"),
    ({"warmup_epochs": "50", "epochs": "10", "scale_schedule_ratio": "1"}, "warmup"),
    ({"recipe": "spicy"}, "recipe=spicy: neither a shipped recipe"),
    ({"system": "z9"}, "unknown system 'z9'"),
    ({"loss": "hinge"}, "loss must be one of bce, cross_entropy, not 'hinge'"),
    ({"write_mode": "foo"}, "write_mode must be one of raw, jpg, proportion, smart"),
    ({"init_conv": "xavier"}, "init_conv must be one of kaiming_normal, torchvision"),
    ({"device": "gpu"}, r"device must be one of cuda, cpu \(or empty\)"),
    ({"lr": "-1"}, r"lr=-1.0 must be above 0 \(the command line\)"),
    ({"lr_reference_batch": "0"}, "lr_reference_batch=0 must be at least 1"),
    ({"momentum": "1.5"}, r"momentum=1.5 must be in \[0, 1\)"),
    ({"crop_scale_min": "2"}, r"crop_scale_min=2.0 must be in \(0, 1\]"),
    ({"progress_every_steps": "0"}, "progress_every_steps=0 must be at least 1"),
    ({"max_run_minutes": "-1"}, "max_run_minutes=-1.0 must be at least 0"),
    ({"master_port": "99999"}, r"master_port=99999 must be in \[1, 65535\]"),
    ({"write_jpeg_quality": "200"}, r"write_jpeg_quality=200 must be in \[1, 100\]"),
    ({"write_compress_probability": "2"}, r"write_compress_probability=2.0 must be in \[0, 1\]"),
    ({"price_usd_per_hour": "-10"}, "price_usd_per_hour=-10.0 must be at least 0"),
    ({"nodes": "-2"}, "nodes=-2 must be at least 0"),
    ({"org": "Acme/Labs"}, "org 'Acme/Labs' names a folder"),
    ({"org": ""}, "org '' names a folder"),
    ({"org": "x" * 101}, "org is 101 characters long"),
    ({"results_dir": ""}, "results_dir is empty: name a folder"),
    ({"seeds": "a,b", "runs": "2"}, "not seeds: a, b"),
    ({"seeds": "1,4294967296", "runs": "2"}, r"not seeds: 4294967296; seeds are whole numbers in \[0, 4294967296\)"),
    ({"cuda_graphs": "true"}, "cuda_graphs=true needs compile=true and device cuda"),
    ({"compile_dynamic": "true"}, "compile_dynamic=true needs compile=true"),
    ({"cudnn_benchmark": "true"}, "cudnn_benchmark=true on device cpu"),
])
def test_bad_input_is_rejected_with_a_reason(overrides, message):
    with pytest.raises(ConfigError, match=message):
        resolve("cpu", overrides)


def test_every_declaration_admits_values_of_its_type_and_the_published_recipes():
    from submission import settings as declared
    from submission import system_descriptor
    for name in declared.names():
        allowed, kind = declared.admits(name), declared.value_type(name)
        if isinstance(allowed, declared.Range):
            assert kind in (int, float), f"{name}: a range for a {kind.__name__} setting"
        elif allowed is not None:
            assert kind is str and all(isinstance(word, str) for word in allowed), name
        if declared.kind(name) != declared.RECIPE:
            assert declared.problem(name, declared.default(name)) is None, f"{name}'s default is refused"
    for recipe in ("mild", "baseline"):
        for system in system_descriptor.available_systems():
            resolve(system, {"recipe": recipe})       # raises if a published value is refused
    resolve("cpu", {"dataset": "fashion-mnist"})      # the embedded campaign's values too


def test_every_problem_is_reported_at_once():
    with pytest.raises(ConfigError) as caught:
        resolve("cpu", {"lr": "0", "momentum": "-0.1", "write_mode": "big"})
    assert all(word in str(caught.value) for word in ("lr=0.0", "momentum=-0.1", "write_mode"))


def test_a_price_given_on_the_command_line_does_not_keep_the_descriptors_source():
    listed = resolve("p4d", {})
    assert listed.price_usd_per_hour > 0 and "AWS" in listed.price_source and listed.price_date
    own = resolve("p4d", {"price_usd_per_hour": "30"})
    assert (own.price_usd_per_hour, own.price_source, own.price_date) == (30.0, "the command line", "")
    sourced = resolve("p4d", {"price_usd_per_hour": "30", "price_source": "our contract"})
    assert sourced.price_source == "our contract" and sourced.price_date == ""
    dated = resolve("p4d", {"price_date": "2024-05", "price_source": "re-checked"})
    assert (dated.price_usd_per_hour, dated.price_source, dated.price_date) == (
        listed.price_usd_per_hour, "re-checked", "2024-05")


@pytest.mark.parametrize("edit, message", [
    ({"harness": [1]}, '"harness" must be an object'),
    ({"number_of_nodes": "two"}, '"number_of_nodes" must be a whole number of at least 1'),
    ({"accelerators_per_node": -1}, '"accelerators_per_node" must be a whole number'),
    ({"status": "available"}, '"status" \'available\' is not one of'),
    ({"division": "closedish"}, '"division" must be "open" or "closed"'),
    ({"system_name": "my/box"}, "system_name 'my/box' names a folder"),
])
def test_a_broken_descriptor_is_refused_naming_the_file_and_field(monkeypatch, tmp_path, edit, message):
    from submission import system_descriptor as descriptor_module
    for path in descriptor_module.SYSTEMS_DIR.glob("*.json"):
        (tmp_path / path.name).write_text(path.read_text())
    descriptor = json.loads((tmp_path / "p4d.json").read_text())
    (tmp_path / "broken.json").write_text(json.dumps({**descriptor, **edit}))
    monkeypatch.setattr(descriptor_module, "SYSTEMS_DIR", tmp_path)
    with pytest.raises(ConfigError, match=message):
        resolve("broken", {})


def test_cuda_graphs_are_refused_around_ddp():
    with pytest.raises(ConfigError, match="cuda_graphs=true with 8 processes"):
        resolve("p4d", {"compile": "true", "cuda_graphs": "true"})
    assert resolve("p4d", {"compile": "true", "cuda_graphs": "true", "procs_per_node": "1"}).cuda_graphs


def test_gpu_compile_settings_resolve_on_a_gpu_system():
    config = resolve("p4d", {"compile": "true", "compile_dynamic": "true", "cudnn_benchmark": "true"})
    assert config.compile_dynamic and config.cudnn_benchmark
    assert not resolve("p4d", {}).cudnn_benchmark


def test_overrides_must_be_key_value():
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["p4d"])


def test_config_round_trips_through_a_dict():
    cfg = resolve("a2", {"runs": "2", "seeds": "1,2"})
    again = config.Config.from_dict(cfg.to_dict())
    assert again.settings == cfg.settings and again.descriptor == cfg.descriptor
    assert again.peak_lr == cfg.peak_lr


@pytest.mark.e2e
def test_dry_run_prints_config_and_torchrun_command_and_p4d_fails_here(tmp_path):
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "submission", "run", "system=p4d",
                          "data_dir=/nonexistent/imagenet", f"results_dir={tmp_path}", "--dry-run"],
                         capture_output=True, text=True, cwd=config.REPO_ROOT)
    assert '"global_batch_size": 2048' in out.stdout
    assert "submission.launcher --nproc_per_node=8" in out.stdout      # torchrun, quiet when stopped
    assert out.returncode == 2
    assert "describes 8 GPU(s) per node, this machine has 0 visible" in out.stderr
    assert "system=local" in out.stderr and "data_dir=/nonexistent/imagenet" in out.stderr
    real = subprocess.run([sys.executable, "-m", "submission", "run", "system=p4d",
                           f"results_dir={tmp_path}"], capture_output=True, text=True,
                          cwd=config.REPO_ROOT)
    assert real.returncode == 2 and "0 visible" in real.stderr and "needs data_dir" in real.stderr
    assert not any(tmp_path.iterdir()), "a refused campaign must not touch results/"


def test_settings_verb_takes_a_recipe_and_refuses_other_keys(capsys):
    from submission import cli
    assert cli.main(["settings", "recipe=baseline"]) == 0
    assert "eval_resize = 256" in capsys.readouterr().out
    assert cli.main(["settings", "system=cpu"]) == 2
    assert "settings takes only recipe=NAME" in capsys.readouterr().err
