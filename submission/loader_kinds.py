"""The loader kinds: what each word of the `train_loader` setting means to the code that asks
about a loader without building one (prepare, the methods' declarations, the bench, the
projection, the launch notes), one frozen record per kind.

`kind_of` is the one place that maps the setting's word to its kind; `loaders/run_loaders.py`
maps a kind to the code that builds it, and each loader carries its kind (`loaders/protocol.py`).
Nothing here imports torch or the loaders: the settings' declarations read it too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args

# the train_loader setting's words (settings.py declares the setting with this type)
TrainLoader = Literal["ffcv", "torchvision", "device"]


@dataclass(frozen=True)
class LoaderKind:
    word: TrainLoader           # the train_loader setting's word
    name: str                   # for people: the bench's rows, reports
    threads_are: str            # what its workers_per_device threads are, for people
    on_device: bool             # decodes, crops and resizes on the run's device: its rate is the
                                # device's, not a multiple of its host threads' (which only gather bytes)
    augments_each_image: bool   # takes the configuration's RandAugment or TrivialAugment
    pil_workers: bool           # decodes and augments each image with PIL in DataLoader worker
                                # processes: the CPU-bound loader, whose projection needs its own
                                # figures and whose per-image work the bench times
    reads_beton_itself: bool    # with its own reader (data/beton_samples.py), not FFCV's: prepare
                                # checks the .beton's layout before run_start
    evaluation: TrainLoader     # the kind whose loader evaluates a run that trains with this one
    beside: tuple[TrainLoader, ...]  # the loaders the bench measures beside it: the first that runs
                                # the configuration (`runs`)
    uncounted_ops: str | None   # why the bench cannot count its torch operations per batch (the
                                # profiler sees the calling thread only); None: it counts them

    def runs(self, augmented: bool) -> bool:
        """Whether this loader can train a configuration with (or without) a per-image augmentation."""
        return self.augments_each_image or not augmented


FFCV = LoaderKind("ffcv", "FFCV", "thread(s)", on_device=False, augments_each_image=False, pil_workers=False,
                  reads_beton_itself=False, evaluation="ffcv", beside=("device",),
                  uncounted_ops="made in FFCV's own threads, which the profiler of this thread does not see")
TORCHVISION = LoaderKind("torchvision", "torchvision", "DataLoader worker(s)", on_device=False,
                         augments_each_image=True, pil_workers=True, reads_beton_itself=True,
                         evaluation="ffcv", beside=("device",),
                         uncounted_ops="made in DataLoader worker processes, which the profiler of this "
                                       "process does not see")
# beside the device loader, the host's loader the recipe would use without it: FFCV's, or
# torchvision's where the configuration augments each image
DEVICE = LoaderKind("device", "device", "thread(s)", on_device=True, augments_each_image=True, pil_workers=False,
                    reads_beton_itself=True, evaluation="device", beside=("ffcv", "torchvision"),
                    uncounted_ops=None)
KINDS: dict[TrainLoader, LoaderKind] = {kind.word: kind for kind in (FFCV, TORCHVISION, DEVICE)}
assert tuple(KINDS) == get_args(TrainLoader), "one kind per train_loader word, in the Literal's order"


def kind_of(word: str) -> LoaderKind:
    """The kind a train_loader word (or a bench profile's loader kind) names."""
    for kind in KINDS.values():
        if kind.word == word:
            return kind
    raise ValueError(f"train_loader={word} is not a loader: one of {', '.join(KINDS)}")


def augmenting_words() -> str:
    """The train_loader words that take a per-image augmentation, for a message: "a or b"."""
    return " or ".join(kind.word for kind in KINDS.values() if kind.augments_each_image)


class _Configured(Protocol):
    @property
    def train_loader(self) -> str: ...

    def recipe_value(self, name: str) -> Any: ...


def recipe_loader_if_replaced(config: _Configured) -> LoaderKind | None:
    """The recipe's own loader when `config` trains with another (a change the launch, the run's
    system description and the bench command name), else None."""
    published = kind_of(config.recipe_value("train_loader"))
    return None if kind_of(config.train_loader) is published else published
