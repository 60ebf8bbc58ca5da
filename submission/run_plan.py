"""When things happen in a run (`RunPlan`): built once, here, without torch.

The training loop, every bench row, `project` and `settings` use this plan and nothing else,
so that a figure about the run is computed from the run's own schedule: steps per epoch
(data/sharding.py: FFCV's distributed order gives each rank ceil(samples / processes) images
and drops the last incomplete batch), total and warm-up steps, the evaluation cadence, the
learning rate, the side of each step (ColOut, then progressive resizing: the pinned side, and
the side the tensor has after Composer's scale-factor resize) and which steps are two-pass
SAM steps. What a run trains with is step.py's `RecipeStep`; what changes from one step to
the next reaches it as one `StepPlan`, the record `RunPlan.at` makes for each step.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .config import Config
from .data.sharding import refuse_fewer_than_one_batch, steps_per_epoch
from .methods.colout import kept_size
from .methods.progressive_resize import output_side, side_at
from .methods.schedule import lr_at


@dataclass(frozen=True)
class StepPlan:
    """What the RunPlan schedules for one step, and all the step is told of it: every value
    that changes during a run. A method scheduled over the run adds a field here, filled in
    `RunPlan.at` by its module's schedule function and read in `RecipeStep.train_on`."""
    lr: float
    side: int       # the pinned training side (RunPlan.side)


@dataclass(frozen=True)
class RunPlan:
    """When things happen in a run of `config` on `train_samples` images."""
    config: Config = dataclasses.field(repr=False, compare=False)
    train_samples: int
    world_size: int
    steps_per_epoch: int
    total_steps: int
    warmup_steps: int
    eval_every: int

    @classmethod
    def of(cls, config: Config, train_samples: int, world_size: int | None = None) -> RunPlan:
        """The plan of a run of `config` on `train_samples` training images over
        `world_size` processes (default: the configuration's)."""
        world = world_size or config.world_size
        refuse_fewer_than_one_batch(train_samples, config.batch_per_device, world)
        per_epoch = steps_per_epoch(train_samples, config.batch_per_device, world)
        total = max(1, round(config.train_epochs * per_epoch))
        return cls(config, train_samples, world, per_epoch, total,
                   round(config.warmup_train_epochs * per_epoch),
                   max(1, round(config.eval_every_epochs * per_epoch)))

    @property
    def global_batch(self) -> int:
        return self.config.batch_per_device * self.world_size

    def at(self, step: int) -> StepPlan:
        """What the 0-based `step` trains with, where the run changes it."""
        return StepPlan(lr=self.lr(step), side=self.side(step))

    def lr(self, step: int) -> float:
        """Learning rate of the 0-based `step`: linear warm-up, then cosine to
        lr_final_fraction of the peak."""
        return lr_at(step, self.total_steps, self.warmup_steps, self.config.peak_lr,
                     self.config.lr_final_fraction)

    @property
    def full_side(self) -> int:
        """The side batches train at without progressive resizing (ColOut's crop of the
        loader's train_resolution)."""
        return kept_size(self.config.train_resolution, self.config.colout_fraction)

    def side(self, step: int) -> int:
        """Pinned training side of the 0-based `step` (ColOut, then progressive resizing,
        rounded to the resize multiple): the side the schedule names and the bench keys
        its rates by. The batch's own side is `trained_side`."""
        return side_at(step, self.steps_per_epoch, self.total_steps, self.config, self.full_side)

    def trained_side(self, step: int) -> int:
        """The side of the tensor the 0-based `step` trains on: the pinned side, or one
        pixel less where Composer's scale factor pinned / full side floors it (176 -> 120
        gives 119; methods/progressive_resize.py)."""
        return output_side(self.full_side, self.side(step))

    def sam_steps(self, stop: int | None = None) -> int:
        """Two-pass SAM steps among the first `stop` steps (default: the whole budget):
        every sam_interval-th step, counting from 1."""
        interval = self.config.sam_interval
        return (self.total_steps if stop is None else stop) // interval if interval else 0

    def side_runs(self) -> list[tuple[int, int, int]]:
        """(side, first step, steps) for each stretch of steps at one side, in order. The side
        never shrinks as the steps go on (progressive resizing only scales up, ColOut trims a
        fixed share), so each stretch ends where a bisection first finds another side: a
        schedule of millions of small steps (a CPU's projection of ImageNet) takes
        milliseconds, not minutes."""
        runs: list[tuple[int, int, int]] = []
        step = 0
        while step < self.total_steps:
            side = self.side(step)
            low, high = step, self.total_steps - 1        # the stretch's last step lies in between
            while low < high:
                middle = (low + high + 1) // 2
                if self.side(middle) == side:
                    low = middle
                else:
                    high = middle - 1
            runs.append((side, step, low - step + 1))
            step = low + 1
        return runs

    def sides(self) -> list[int]:
        """Every distinct training side, in the order the run meets them."""
        return [side for side, _, _ in self.side_runs()]

    def evaluates_after(self, step: int) -> bool:
        """Whether the run evaluates once `step` steps are done (every eval_every steps,
        and at the end of the budget)."""
        return step % self.eval_every == 0 or step == self.total_steps

    def evaluations_until(self, stop: int) -> int:
        """Evaluations of a run that ends after `stop` steps."""
        return stop // self.eval_every + (1 if stop == self.total_steps and stop % self.eval_every else 0)

    def last_regular_evaluation(self) -> int:
        """The last step before the budget's end that evaluates on the cadence (0: none)."""
        last = self.total_steps // self.eval_every * self.eval_every
        return last if last < self.total_steps else 0

    def epoch(self, step: int) -> float:
        return step / self.steps_per_epoch
