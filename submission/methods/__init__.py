"""The recipes' speed-up methods, one small module each; none knows about MLPerf.

Mild (and every recipe):
blurpool            anti-aliased downsampling (model surgery, model.py)
loss                BCE-with-logits (sum / batch) or cross-entropy, label smoothing
ema                 exponential moving average of weights and BN statistics
progressive_resize  on-device downscaling of training batches early in training
schedule            step-wise linear warmup + cosine decay
sgdw                SGD with weight decay decoupled from the gradient

Medium / Hot (docs/recipes-medium-hot.md); step.py runs all but RandAugment:
mixup               MixUp of a batch and its mixed (smoothed) targets, drawn per forward pass
sam                 sharpness-aware minimisation around a base optimizer (every k-th step)
stochastic_depth    per-sample / per-block stochastic depth for ResNet Bottlenecks
colout              batch-wise removal of random rows and columns
randaugment         per-image PIL augmentation (Hot), in the torchvision loader's workers
                    (data/run_loaders.py hands it to data/torchvision_loader.py)

Not in a published recipe (docs/cpu-augment.md):
trivialaugment      one PIL operation per image in place of RandAugment, where RandAugment acts

Each module declares what the harness knows of it besides its code (`DECLARATIONS`,
method.py). `ALL` collects every module here that declares one, in the order of the modules'
names. The table is read from each module's source, its `DECLARATIONS = ...` statement
evaluated alone with the names of method.py and setting_declaration.py: the settings, the
configuration and every verb that resolves one then need no torch, which the modules' code
imports (seconds on one CPU).
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from .. import setting_declaration
from .method import Method

# Composer counts channels-last memory as an algorithm (ChannelsLast); here it is the model's
# memory format (model.py), declared with the methods so that the logs name it among them
CHANNELS_LAST = Method("channels_last", False, lambda c: "channels last")

DECLARATION = "DECLARATIONS"
# what a declaration may name besides Python's builtins
_NAMES = {**{name: getattr(setting_declaration, name) for name in dir(setting_declaration)
             if not name.startswith("_")}, "Method": Method}


def declarations_in(path: Path) -> tuple[Method, ...]:
    """The methods a module's source declares (its `DECLARATIONS = (...)`), () where none."""
    for statement in ast.parse(path.read_text(), str(path)).body:
        if (isinstance(statement, ast.Assign)
                and [getattr(target, "id", None) for target in statement.targets] == [DECLARATION]):
            code = compile(ast.Expression(statement.value), str(path), "eval")
            try:
                return tuple(eval(code, dict(_NAMES)))
            except NameError as exc:
                raise ImportError(f"{path}: its {DECLARATION} may name only what method.py and "
                                  f"setting_declaration.py define ({exc})") from None
    return ()


def _table() -> tuple[Method, ...]:
    found = {path.stem: declarations_in(path) for path in Path(__file__).parent.glob("*.py")}
    found["channels_last"] = (CHANNELS_LAST,)
    return tuple(method for name in sorted(found) for method in found[name])


def _settings(methods: tuple[Method, ...]) -> dict[str, Any]:
    declared: dict[str, Any] = {}
    for method in methods:
        twice = set(declared) & set(method.settings)
        if twice:
            raise ImportError(f"settings declared by two methods: {', '.join(sorted(twice))}")
        declared.update(method.settings)
    return declared


# every method, in the order the logs and `settings` name them (their modules' names)
ALL: tuple[Method, ...] = _table()
# every method's own settings, name -> declaration (settings.py adds them to Settings)
SETTINGS: dict[str, Any] = _settings(ALL)


def problems(config) -> list[str]:
    """What the methods a configuration uses say its settings cannot do together."""
    return [problem for problem in (method.problem_of(config) for method in ALL) if problem]
