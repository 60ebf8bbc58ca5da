"""docs/layout.md's worked example of adding a method, kept true: its diff, applied as written
to a copy of the tree, gives a method that the configuration, the `settings` verb and the recipe
step know (one step trained with it on, on the CPU, in a process of its own)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

pytestmark = pytest.mark.e2e

# run in the patched copy: what the example says the method gets
CHECKS = '''
import torch
import submission.step as step_module
from submission.config import ConfigError, resolve
from submission.show_settings import main as settings_verb
from submission.step import build_step

assert "label noise 0.01" in resolve(None, {"recipe": "hot"}).methods
try:
    resolve(None, {"label_noise": "-1"})
    raise SystemExit("label_noise=-1 was admitted")
except ConfigError as exc:
    assert "label_noise=-1.0 must be in [0, 1] (the command line)" in str(exc), exc
assert "label_noise = 0.01  -- share of labels replaced at random; 0: none" in settings_verb(["recipe=hot"])

config = resolve("cpu", {"label_noise": "1.0", "ema_half_life_batches": "0"})
drawn = []
noisy_labels = step_module.noisy_labels
step_module.noisy_labels = lambda *args: drawn.append(args[1:]) or noisy_labels(*args)
torch.manual_seed(0)
step = build_step(config, 10, torch.device("cpu"))
images = torch.randint(0, 256, (4, 3, 16, 16), dtype=torch.uint8).contiguous(memory_format=torch.channels_last)
loss = step(images, torch.zeros(4, dtype=torch.long), 16)
assert drawn == [(10, 1.0)] and torch.isfinite(loss), (drawn, loss)
print("label noise trained a step")
'''


def example_diff() -> str:
    text = (REPO / "docs" / "layout.md").read_text()
    section = text[text.index("## Adding a method"):]
    return re.search(r"```diff\n(.*?)```", section, re.S)[1]


def test_the_layout_examples_method_is_known_everywhere_and_trains_a_step(tmp_path):
    copy = tmp_path / "tree"
    for folder in ("submission", "systems", "tests/methods"):
        shutil.copytree(REPO / folder, copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "example.diff").write_text(example_diff())
    subprocess.run(["git", "apply", "example.diff"], cwd=copy, check=True)
    done = subprocess.run([sys.executable, "-c", CHECKS], cwd=copy, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(copy)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "label noise trained a step" in done.stdout
