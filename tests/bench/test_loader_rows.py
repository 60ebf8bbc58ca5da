"""The bench's loader rows in this process (bench/loader_rows.py): with a compiled step, each
loader feeds it at the compiled rows' two sides as it feeds the eager step, and the profile's
parts hold both; without one, the row says why nothing was measured."""
from __future__ import annotations

import pytest
import torch

from submission.bench.compiled_rows import CompiledStep
from submission.bench.loader_rows import _compiled_fed_rows, loader_rows
from submission.bench.timing import synthetic_batch
from submission.config import resolve
from submission.data.prepare import prepare
from submission.data.synthetic_images import FolderShape, write_folder
from submission.loaders import device_loader
from submission.step import build_step

CPU = torch.device("cpu")
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600),      # minutes: both loaders' numba pipelines
              pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning"),
              pytest.mark.filterwarnings("ignore:The image decoding and encoding capabilities:DeprecationWarning")]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("loader-rows")
    write_folder(root / "images", FolderShape(classes=3, train_per_class=16, val_per_class=4, sides=(40, 64)))
    config = resolve("cpu", {"dataset": "imagenet", "data_dir": str(root / "images"), "cache_dir": str(root / "cache"),
                             "batch_per_device": "8", "train_resolution": "32", "eval_resolution": "32",
                             "workers_per_device": "1"})
    data = prepare(config)
    step = build_step(config, data.num_classes, CPU)
    return config, data, step, synthetic_batch(8, 32, data.num_classes, CPU)


def test_each_loader_feeds_the_compiled_step_at_its_two_sides(small, capsys):
    """The step a compile=true bench compiles stands here as the eager recipe step (Inductor's
    C++ build of it takes minutes on a CPU): what is asserted is which rows each loader gets
    and where the profile keeps them."""
    config, data, step, full = small
    compiled = CompiledStep(step, "compiled", (32, 16))
    rows = loader_rows(config, step, data, CPU, 1, 1, full, 100.0, (32,), compiled)
    out = capsys.readouterr().out
    for part in (rows.own, rows.beside):
        assert sorted(part.fed_step_by_side) == [32]
        assert sorted(part.compiled_fed_step_by_side) == [16, 32]
        assert all(v.fed_img_per_s > 0 and v.synthetic_img_per_s > 0 and v.in_turns
                   for v in part.compiled_fed_step_by_side.values())
    for name in ("FFCV", "device"):
        assert f"the compiled step fed by the {name} loader, in turns with it on synthetic batches:" in out
    table = out.split("the loaders side by side")[1].splitlines()
    assert table[1].split()[4:10] == ["fed", "32", "px", "compiled", "32", "compiled"], table
    device_row = next(line for line in table[2:4] if line.split()[0] == "device").split()
    ratio = rows.beside.compiled_fed_step_by_side[16]
    assert device_row[5] == f"{ratio.fed_img_per_s / ratio.synthetic_img_per_s:.2f}x", table   # after img/s, threads


def test_without_a_compiled_step_the_row_says_why_none_was_fed(small, capsys):
    config, data, step, full = small
    loader = device_loader.train_loader(data.train_path, 32, 8, 1, 0, CPU, 0, 1)
    assert _compiled_fed_rows(config, None, loader, CPU, 1, 1) is None
    assert capsys.readouterr().out == (
        "  the compiled step fed by the device loader: not measured (compile=false: the bench compiles the "
        "step only with compile=true; on a CPU too, where Inductor's C++ build of the step takes minutes)\n")
