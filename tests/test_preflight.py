"""submission.preflight: what this machine can run, decided before anything is written: a
named system against this machine (a faked inventory: no GPU here), the GPUs' bf16 and NCCL,
the precision of a CPU run, the loader threads fitted to the usable CPUs, and what a launch
says before it starts."""
from __future__ import annotations

import dataclasses

import pytest

from submission import campaign, inventory, preflight
from submission.config import ConfigError, resolve
from submission.loader_threads import LoaderThreads
from submission.preflight import resolve_here

from conftest import A100_40, A100_80, A100_PCIE, H100, T4, run_submission


def _images(root):
    for split in ("train", "val"):
        (root / split / "n01").mkdir(parents=True)
    return root


@pytest.mark.parametrize("bf16, advice", [
    (["avx512_bf16"], "or amp_dtype=bf16 (this CPU has avx512_bf16"),
    ([], "this CPU has no bf16 instructions, so amp_dtype=bf16 would be emulated too"),
])
def test_fp16_autocast_on_a_cpu_is_refused_naming_what_to_use(monkeypatch, tmp_path, bf16, advice):
    monkeypatch.setattr(inventory, "cpu_bf16", lambda: bf16)
    config = resolve_here("local", {"data_dir": str(_images(tmp_path)), "device": "cpu", "workers_per_device": "1"})
    assert (config.precision, config.amp_dtype) == ("amp", "fp16")      # the recipe's, untouched
    with pytest.raises(ConfigError) as refused:
        preflight.launch_plan(config).approved()
    message = str(refused.value)
    assert "precision=amp amp_dtype=fp16 (submission/recipes/mild.yaml) on the CPU" in message
    assert "pass precision=fp32" in message and advice in message


def test_bf16_on_a_cpu_runs_only_where_the_cpu_has_bf16_instructions(monkeypatch, tmp_path):
    config = resolve_here("local", {"data_dir": str(_images(tmp_path)), "device": "cpu", "workers_per_device": "1",
                               "amp_dtype": "bf16"})
    monkeypatch.setattr(inventory, "cpu_bf16", lambda: ["amx_bf16"])
    assert preflight.precision_problems(config) == []
    monkeypatch.setattr(inventory, "cpu_bf16", lambda: [])
    assert "would be emulated, slower than fp32; pass precision=fp32" in preflight.precision_problems(config)[0]
    assert preflight.precision_problems(config.replaced({"precision": "fp32"}, "test")) == []


def test_the_cpu_descriptor_states_its_precision(tmp_path):
    config = resolve("cpu", {"dataset": "imagenet", "data_dir": str(tmp_path)})
    assert config.precision == "fp32" and config.origin("precision") == "systems/cpu.json"


@pytest.mark.e2e
def test_a_cpu_launch_with_fp16_is_refused_before_anything_is_written(tmp_path):
    results, cache = tmp_path / "results", tmp_path / "cache"
    done = run_submission("run", "system=local", f"data_dir={_images(tmp_path / 'images')}", "device=cpu",
                          f"results_dir={results}", f"cache_dir={cache}", timeout=120)
    assert done.returncode == 2, done.stderr
    assert "fp16 autocast has no fast kernels on CPUs" in done.stderr and "pass precision=fp32" in done.stderr
    assert "Traceback" not in done.stderr
    assert not results.exists() and not cache.exists()


def test_a_changed_published_loader_is_said_once_and_recorded(capsys):
    from submission import runs
    from submission.system_json import run_description
    config = resolve("cpu", {"train_loader": "torchvision"})
    runs.plan_launch(config)
    said = [line for line in capsys.readouterr().out.splitlines() if "published loader" in line]
    assert said == ["[campaign] train_loader=torchvision (the command line): the mild recipe's published "
                    "loader is ffcv (submission/recipes/mild.yaml); the run's system description records "
                    "the change"]
    assert run_description(config)["sw_notes"].endswith("; train_loader torchvision (the recipe's: ffcv)")
    assert "train_loader" not in run_description(resolve("cpu", {}))["sw_notes"]
    assert "precision fp32" in run_description(config)["sw_notes"]
    noted = dataclasses.replace(config, descriptor=config.descriptor.replaced(sw_notes="CUDA 11.3"))
    assert run_description(noted)["sw_notes"].startswith("CUDA 11.3; mild recipe (")
    assert run_description(noted)["sw_notes"].endswith("; train_loader torchvision (the recipe's: ffcv)")


def test_the_launch_line_names_the_loader_threads_that_will_run(tmp_path, capsys, monkeypatch):
    """The first line says the loader threads that will run and where the count came from: on
    a CPU today's rule (8, lowered to the CPUs), a preset's value lowered with a note after it."""
    from submission import inventory, runs
    monkeypatch.setattr(inventory, "usable_cpus", lambda: 2)
    config = resolve_here("local", {"data_dir": str(_images(tmp_path)), "device": "cpu", "precision": "fp32"})
    assert config.workers_per_device == 0           # unset: derived where it is launched
    runs.plan_launch(config)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("1 process(es), 2 torch and 2 loader threads each (workers_per_device "
                             "derived: min(8, 2 usable CPUs / 1 process(es)))"), lines[0]
    assert len(lines) == 1
    monkeypatch.setattr(inventory, "usable_cpus", lambda: 1)
    runs.plan_launch(resolve("cpu", {}))              # the embedded preset's 2, on one CPU
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("1 torch and 1 loader threads each (workers_per_device derived: "
                             "1 usable CPUs / 1 process(es))"), lines[0]
    assert lines[1] == ("[campaign] workers_per_device=1: 1 usable CPUs / 1 process(es) (was 2, "
                        "submission/embedded.yaml)")


@pytest.mark.parametrize("found, overrides, message", [
    ([H100], {}, "describes 8 GPU(s) per node, this machine has 1 visible"),
    ([H100] * 8, {}, "describes NVIDIA A100-SXM4-40GB, this machine has NVIDIA H100"),
    ([A100_80] * 8, {}, "describes NVIDIA A100-SXM4-40GB, this machine has NVIDIA A100-SXM4-80GB (80 GB)"),
    ([A100_PCIE] * 8, {}, "describes NVIDIA A100-SXM4-40GB, this machine has NVIDIA A100-PCIE-40GB (40 GB)"),
    ([A100_40] * 8, {"procs_per_node": "1"}, "procs_per_node=1, but systems/p4d.json describes 8 GPUs per node; "
                                             "to train on fewer, hide the others with CUDA_VISIBLE_DEVICES"),
    ([A100_40] * 8, {"device": "cpu"}, "device=cpu, but systems/p4d.json describes 8 GPU(s)"),
])
def test_a_named_system_that_is_not_this_machine_is_refused(gpus, tmp_path, found, overrides, message):
    gpus.extend(found)
    cfg = resolve("p4d", {"data_dir": str(tmp_path), "workers_per_device": "1",
                          "results_dir": str(tmp_path / "results"), **overrides})
    with pytest.raises(ConfigError) as refused:
        campaign.run_campaign(cfg)
    assert message in str(refused.value) and "system=local" in str(refused.value)
    assert not (tmp_path / "results").exists()


def test_the_machine_the_descriptor_describes_is_accepted(gpus, tmp_path):
    gpus.extend([A100_40] * 8)
    cfg = resolve("p4d", {"data_dir": str(tmp_path), "workers_per_device": "1"})
    assert preflight.hardware_differences(cfg) == []


# An H200's driver names no size and reports 143,771 MiB (140 GiB) of the 141 GB it is sold with
H200 = inventory.GPU("NVIDIA H200", 143_771 * 2**20, "1980 MHz (max SM clock)", "PCIe Gen5 x16", nvlink=True)
P5_HOST = (192, 1_894 * 2**30)      # a p5.48xlarge's 2048 GiB, less what the kernel keeps
NEW_SYSTEMS = ("p5", "p5en", "a3", "a3-ultra", "nd-h100-v5", "nd-h200-v5")


@pytest.mark.parametrize("system, found", [("p5en", [H200] * 8), ("p5", [H100] * 8)])
def test_an_h100_or_h200_instance_is_the_machine_its_descriptor_describes(gpus, monkeypatch, tmp_path,
                                                                           system, found):
    gpus.extend(found)
    monkeypatch.setattr(inventory, "host", lambda: P5_HOST)
    cfg = resolve(system, {"data_dir": str(tmp_path), "workers_per_device": "1"})
    assert preflight.hardware_differences(cfg) == []
    gpus[:] = [H100] * 8 if system == "p5en" else [H200] * 8
    assert any("this machine has NVIDIA H" in d for d in preflight.hardware_differences(cfg))


@pytest.mark.parametrize("system", NEW_SYSTEMS)
def test_dry_run_of_an_h100_or_h200_system_prints_the_torchrun_command_then_refuses_this_host(
        gpus, monkeypatch, tmp_path, capsys, system):
    from submission import cli
    from submission.options import RunOptions
    monkeypatch.setattr(inventory, "host", lambda: (2, 24 * 2**30))     # this build machine
    with pytest.raises(ConfigError) as refused:
        cli.cmd_run(RunOptions(dry_run=True),
                    [f"system={system}", f"data_dir={tmp_path}", f"results_dir={tmp_path / 'results'}"])
    out = capsys.readouterr().out
    assert '"global_batch_size": 2048' in out and "submission.launcher --nproc_per_node=8" in out
    vcpus = resolve(system, {}).descriptor.host_vcpus
    assert f"it describes {vcpus} vCPUs, this machine has 2" in str(refused.value)
    assert "it describes 8 GPU(s) per node, this machine has 0 visible" in str(refused.value)
    assert not (tmp_path / "results").exists()


def test_device_cuda_on_a_local_machine_without_gpu_says_so(gpus):
    with pytest.raises(ConfigError, match="this machine has no GPU that torch can see"):
        preflight.launch_plan(resolve_here("local", {"device": "cuda", "workers_per_device": "1"})).approved()


@pytest.mark.parametrize("host, message", [
    ((2, 1_121 * 2**30), "it describes 96 vCPUs, this machine has 2"),
    ((96, 24 * 2**30), "it describes 1152 GiB of host memory, this machine has 24 GiB"),
])
def test_a_named_system_on_another_host_is_refused(gpus, monkeypatch, tmp_path, host, message):
    """The descriptor's host facts are what system.json will say: they must be this host's."""
    gpus.extend([A100_40] * 8)
    monkeypatch.setattr(inventory, "host", lambda: host)
    cfg = resolve("p4d", {"data_dir": str(tmp_path), "workers_per_device": "1"})
    assert any(message in problem for problem in preflight.hardware_differences(cfg))


def test_a_descriptor_is_matched_by_model_whatever_the_makers_words_and_gib_as_gb(gpus, monkeypatch, tmp_path):
    """Older drivers name an A100 without "NVIDIA"; GCP lists an a2-highgpu-8g's 680 GiB
    as "680 GB", and Linux shows about 98% of it."""
    gpus.extend([inventory.GPU("A100-SXM4-40GB", 42_298_000_000)] * 8)
    monkeypatch.setattr(inventory, "host", lambda: (96, 666 * 2**30))
    cfg = resolve("a2", {"data_dir": str(tmp_path), "workers_per_device": "1"})
    assert preflight.hardware_differences(cfg) == []


def test_imagenet_on_a_local_machine_without_gpu_needs_device_cpu(gpus, tmp_path):
    cfg = resolve_here("local", {"data_dir": str(tmp_path), "workers_per_device": "1"})
    assert cfg.device_type == "cpu"
    with pytest.raises(ConfigError, match="would train on .* on the CPU \\(on ImageNet: weeks\\).*pass device=cpu"):
        preflight.launch_plan(cfg).approved()
    chosen = resolve_here("local", {"data_dir": str(tmp_path), "workers_per_device": "1", "device": "cpu",
                               "precision": "fp32"})
    preflight.launch_plan(chosen).approved()


def test_local_refusals_point_to_what_fits_not_back_to_local(gpus):
    gpus.extend([A100_40] * 8)
    with pytest.raises(ConfigError, match="use system=cpu, which describes this machine's CPU"):
        preflight.launch_plan(resolve_here("local", {"device": "cpu", "workers_per_device": "1"})).approved()
    with pytest.raises(ConfigError, match=r"CUDA_VISIBLE_DEVICES \(e.g. CUDA_VISIBLE_DEVICES=0,1,2,3\)"):
        preflight.launch_plan(resolve_here("local", {"procs_per_node": "4", "workers_per_device": "1"})).approved()


@pytest.fixture
def cuda(monkeypatch):
    """torch.cuda as it reads on a machine with these (name, capability) GPUs: the
    hardware boundary gpu_problems queries."""
    import torch
    found: list[tuple[str, tuple[int, int]]] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: bool(found))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(found))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: found[i][0])
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: found[i][1])
    monkeypatch.setattr(torch.version, "hip", None)
    return found


def test_bf16_on_a_gpu_without_bf16_tensor_cores_is_refused_before_anything_is_written(
        gpus, cuda, tmp_path):
    gpus.extend([T4, T4])
    cuda.extend([("Tesla T4", (7, 5))] * 2)
    settings = {"data_dir": str(tmp_path), "results_dir": str(tmp_path / "results"),
                "workers_per_device": "1"}
    with pytest.raises(ConfigError) as refused:
        campaign.run_campaign(resolve_here("local", {**settings, "amp_dtype": "bf16"}))
    assert ("amp_dtype=bf16, but Tesla T4 (GPU 0, 1) has compute capability 7.5: bf16 tensor "
            "cores need 8.0") in str(refused.value)
    assert "use amp_dtype=fp16" in str(refused.value)
    assert not (tmp_path / "results").exists()
    preflight.launch_plan(resolve_here("local", settings)).approved()                  # fp16: fine
    preflight.launch_plan(resolve_here("local", {**settings, "amp_dtype": "bf16",
                                            "precision": "fp32"})).approved()     # no autocast


def test_bf16_is_accepted_on_ampere_and_not_judged_on_rocm(gpus, cuda, tmp_path, monkeypatch):
    import torch
    gpus.append(A100_40)
    cuda.append(("NVIDIA A100-SXM4-40GB", (8, 0)))
    settings = {"data_dir": str(tmp_path), "workers_per_device": "1", "amp_dtype": "bf16"}
    preflight.launch_plan(resolve_here("local", settings)).approved()
    cuda[0] = ("AMD Instinct MI210", (9, 0))
    monkeypatch.setattr(torch.version, "hip", "6.2")
    monkeypatch.setattr(torch.cuda, "get_device_capability",
                        lambda i=0: pytest.fail("a ROCm capability is not a CUDA one"))
    preflight.launch_plan(resolve_here("local", settings)).approved()


def test_several_gpus_without_nccl_are_refused(gpus, tmp_path, monkeypatch):
    import torch.distributed
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: False)
    gpus.extend([A100_40] * 2)
    settings = {"data_dir": str(tmp_path), "workers_per_device": "1"}
    with pytest.raises(ConfigError) as refused:
        preflight.launch_plan(resolve_here("local", settings)).approved()
    assert ("2 processes (2 per node x 1 node(s)) on cuda talk through NCCL, and this torch "
            "build") in str(refused.value)
    assert "install a torch build with NCCL, or train on one GPU (CUDA_VISIBLE_DEVICES=0" in str(refused.value)
    gpus[:] = [A100_40]                       # one process needs no process group
    preflight.launch_plan(resolve_here("local", settings)).approved()


def _dry_run(capsys, *words) -> tuple[int, str, str]:
    from submission import cli
    code = cli.main(["run", *words, "--dry-run"])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def host_of_96(monkeypatch):
    """A 96-CPU machine (only where nothing starts a process per CPU)."""
    import os
    monkeypatch.setattr(os, "cpu_count", lambda: 96)


def test_default_loader_workers_are_fitted_to_the_usable_cpus(gpus, cpus, host_of_96, tmp_path,
                                                              capsys):
    import json
    gpus.extend([A100_40] * 8)
    cpus["count"] = 12                      # e.g. taskset or a cgroup cpuset on a 96-CPU host
    code, out, _ = _dry_run(capsys, "system=local", f"data_dir={tmp_path}")
    assert code == 0
    assert ("NVIDIA A100-SXM4-40GB, 1 loader threads each (workers_per_device derived: 12 usable CPUs "
            "/ 8 process(es) - 1 for the step's thread)") in out
    printed = json.loads(out[out.index("{"):out.index("\n\ntorchrun command")])
    assert printed["settings"]["workers_per_device"] == 1      # what config.json records
    assert printed["origins"]["workers_per_device"].startswith("derived: 12 usable CPUs")
    # the user's own value is refused with the one that fits
    code, out, err = _dry_run(capsys, "system=local", f"data_dir={tmp_path}", "workers_per_device=4")
    assert code == 2
    assert ("workers_per_device=4 (the command line) x 8 process(es) per node is 32 loader "
            "threads, but this process may run on 12 CPUs; pass workers_per_device=1.") in err
    assert "[campaign] workers_per_device=" not in out


def test_loader_workers_that_fit_are_left_as_they_are(gpus, cpus, host_of_96, tmp_path, capsys):
    import json
    gpus.extend([A100_40] * 8)              # p4d: 8 GPUs, 96 vCPUs: 12 each, one for the step
    code, out, err = _dry_run(capsys, "system=p4d", f"data_dir={tmp_path}")
    assert code == 0, err
    assert "[campaign] workers_per_device=" not in out
    assert json.loads(out[out.index("{"):out.index("\n\ntorchrun command")])["settings"][
        "workers_per_device"] == 11
    code, out, err = _dry_run(capsys, "system=p4d", f"data_dir={tmp_path}", "workers_per_device=8")
    assert code == 0, err                   # the user's value is kept
    assert "8 loader threads each (workers_per_device from the command line)" in out
    assert json.loads(out[out.index("{"):out.index("\n\ntorchrun command")])["settings"][
        "workers_per_device"] == 8
    gpus.clear()
    cpus["count"] = 2                       # the embedded campaign as calibrated: 2 on 2 CPUs
    cfg = resolve("cpu", {})
    plan = preflight.launch_plan(cfg)
    assert plan.approved() is cfg and not plan.notes
    assert cfg.workers_per_device == 2 and cfg.origin("workers_per_device") == "submission/embedded.yaml"
    cpus["count"] = 1                       # its preset is the harness's choice too
    plan = preflight.launch_plan(cfg)
    fitted = plan.approved()
    assert fitted.workers_per_device == 1 and fitted.origin("workers_per_device").startswith("derived: 1 usable")
    assert plan.notes == ("workers_per_device=1: 1 usable CPUs / 1 process(es) (was 2, submission/embedded.yaml)",)
    # the check decides; the configuration it checked is left as it was
    assert cfg.workers_per_device == 2 and cfg.origin("workers_per_device") == "submission/embedded.yaml"
    assert preflight.loader_workers(cfg) == LoaderThreads(
        1, note=plan.notes[0], origin="derived: 1 usable CPUs / 1 process(es)")
