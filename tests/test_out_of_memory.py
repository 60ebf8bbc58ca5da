"""Out of memory: where it happened, the setting to change, and a campaign that does not
say "re-run the same command"; evaluation batches that may change on resume."""
from __future__ import annotations

import json
import resource
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from submission import campaign, out_of_memory
from submission.config import parse_overrides, resolve
from submission.data.prepare import prepare
from submission.jsonfile import write_json
from submission.loaders import ffcv_loaders
from submission.model import model_from_config
from submission.results import CampaignError, campaign_folder
from submission.step import Normalizer, autocast_for
from submission.train import evaluate

from conftest import REPO, child_env, quick_settings

pytestmark = pytest.mark.timeout(600)

ADDRESS_SPACE = 16 * 2**30   # each process of the campaign: bounds what the test can take


@pytest.mark.loaders_interpreted
@pytest.mark.e2e
def test_out_of_memory_in_the_warm_up_names_the_place_and_the_setting(tmp_path, cache_dir):
    """A real allocation failure (the CPU allocator's, under RLIMIT_AS, so that nothing is
    touched): the warm-up's first batch at 12288 px is 29 GB. The rank says where and what
    to change, the partial log's run_stop says out of memory, and the campaign does not
    suggest re-running the same command."""
    results = tmp_path / "results"
    settings = quick_settings(results, cache_dir, runs=1, seeds="1", warmup="true", batch_per_device=64,
                              progressive_resize="false", train_resolution=12288)
    prepare(resolve(None, parse_overrides(settings)))     # outside the limit: FFCV's writer

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    done = subprocess.run([sys.executable, "-m", "submission", "run", *settings], cwd=REPO,
                          capture_output=True, text=True, timeout=500, preexec_fn=limit, env=child_env())
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "DefaultCPUAllocator: can't allocate memory" in output     # torch's own error
    place = "in the warm-up at 12288 px (64 images per device), before run_start"
    rank_line = [line for line in done.stdout.splitlines() if "ran out of memory on rank 0" in line]
    assert len(rank_line) == 1, output
    assert rank_line[0].startswith("[run 1/1 seed 1] ran out of memory on rank 0 (cpu: ")
    assert f"GiB of host memory) {place}. Lower batch_per_device (now 64, global batch 64 over " \
           "1 process(es)), e.g. batch_per_device=32; the learning rate follows the global batch " \
           "(lr 2.048 x global batch / lr_reference_batch 2048), so this is a new campaign: add " \
           "new_campaign=true" in rank_line[0]
    assert "eval_batch_size" not in rank_line[0]
    assert "run 1 failed (torchrun exit code 1): out of memory; its partial log is" in done.stderr
    assert "The same command would fail the same way; change the setting named here:\n  " \
           "[run 1/1 seed 1] ran out of memory on rank 0" in done.stderr
    assert "re-run the same command" not in done.stderr
    partial = results / "local_cpu" / "resnet" / "result_0.txt.partial"
    stop = json.loads(partial.read_text().splitlines()[-1].split(":::MLLOG ", 1)[1])
    assert stop["key"] == "run_stop" and stop["metadata"]["status"] == "aborted"
    assert stop["metadata"]["reason"] == f"crashed: out of memory {place}"
    assert '"key": "run_start"' not in partial.read_text()


def _raised_through(place: out_of_memory.At, exc: BaseException) -> BaseException:
    try:
        with place:
            raise exc
    except BaseException as caught:        # noqa: BLE001 - the test looks at what came out
        return caught
    raise AssertionError("not raised")


def test_a_cuda_out_of_memory_in_evaluation_points_at_eval_batch_size(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(
        name="NVIDIA GeForce RTX 3080", total_memory=10 * 2**30))
    config = resolve("p4d", {"data_dir": "/data/imagenet"})   # not this machine: a GPU's figures
    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB.")
    # the innermost place is the one kept
    caught = _raised_through(out_of_memory.At("training", 176, 256, 1250),
                             _raised_through(out_of_memory.At("evaluation", 224, 256, 1250), oom))
    assert out_of_memory.reason(caught) == ("out of memory in the evaluation after step 1250 at "
                                            "224 px (256 images per device)")
    advice = out_of_memory.advice(caught, config, torch.device("cuda", 3), rank=3)
    assert advice == (
        "ran out of memory on rank 3 (cuda:3: NVIDIA GeForce RTX 3080, 10.0 GiB) in the "
        "evaluation after step 1250 at 224 px (256 images per device). Lower eval_batch_size "
        "(now 0: batch_per_device's 256), e.g. eval_batch_size=128; it does not change training, "
        "so the same command with it resumes the campaign.")
    assert out_of_memory.reported(f"noise\n[run 2/5 seed 9] {advice}\n") == f"[run 2/5 seed 9] {advice}"


def test_what_counts_as_out_of_memory():
    try:
        torch.empty(2**62, dtype=torch.uint8)    # refused by the allocator at once
    except RuntimeError as exc:
        cpu = exc
    assert out_of_memory.is_out_of_memory(cpu) and not isinstance(cpu, torch.OutOfMemoryError)
    try:
        raise RuntimeError("compiling failed") from torch.OutOfMemoryError("CUDA out of memory")
    except RuntimeError as exc:
        wrapped = exc
    assert out_of_memory.is_out_of_memory(wrapped)
    assert not out_of_memory.is_out_of_memory(RuntimeError("shape mismatch"))
    unplaced = _raised_through(out_of_memory.At("training", 32, 8, 1), RuntimeError("other"))
    assert out_of_memory.place_of(unplaced) is None
    assert out_of_memory.reason(cpu) == "out of memory (the traceback says where)"
    advice = out_of_memory.advice(cpu, resolve("cpu", {}), torch.device("cpu"), rank=0)
    assert "Lower batch_per_device (now 64" in advice and "Lower eval_batch_size (now 0" in advice


def test_eval_batch_size_changes_no_result_and_may_change_on_resume(tmp_path, cache_dir):
    """Each image's logits do not depend on its evaluation batch (eval mode), so a campaign
    resumes with another eval_batch_size; batch_per_device is still a new campaign."""
    cfg = resolve(None, parse_overrides(quick_settings(tmp_path, cache_dir, runs=2, seeds="1,2")))
    data = prepare(cfg)
    torch.manual_seed(0)
    model = model_from_config(cfg, data.num_classes).eval()
    device, normalize = torch.device("cpu"), Normalizer(torch.device("cpu"))

    def scored(batch: int):
        loader = ffcv_loaders.val_loader(data.val_path, cfg.eval_resolution, cfg.eval_resize, batch, 1,
                                    device, rank=0, world_size=1, num_samples=data.eval_samples)
        with torch.no_grad():
            logits = torch.cat([model(normalize(images)) for images, _ in loader])
        return logits, evaluate(model, loader, normalize, autocast_for(cfg, device), data.eval_samples)

    big, big_accuracy = scored(64)
    small, small_accuracy = scored(7)
    assert torch.equal(big.argmax(1), small.argmax(1)) and big_accuracy == small_accuracy
    torch.testing.assert_close(big, small, rtol=1e-4, atol=1e-4)

    campaign_folder(cfg).path.mkdir(parents=True)
    write_json(campaign_folder(cfg).path / "campaign.json", campaign.new_campaign_state(cfg).to_dict())
    resumed = resolve(None, parse_overrides(quick_settings(tmp_path, cache_dir, runs=2, seeds="1,2",
                                                           eval_batch_size=16)))
    assert campaign.load_campaign(resumed).seeds == [1, 2]
    smaller = resolve(None, parse_overrides(quick_settings(tmp_path, cache_dir, runs=2, seeds="1,2",
                                                           batch_per_device=16)))
    with pytest.raises(CampaignError, match="batch_per_device: 32 -> 16.*new_campaign=true"):
        campaign.load_campaign(smaller)
