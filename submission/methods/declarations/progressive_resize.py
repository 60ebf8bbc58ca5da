"""Progressive resizing's declaration (its code: methods/progressive_resize.py)."""
from dataclasses import dataclass
from typing import Literal

from ...setting_declaration import AT_LEAST_1, RECIPE, declare
from ..method import Method

ResizeGranularity = Literal["epoch", "step"]
ResizeMode = Literal["nearest", "bilinear", "area"]


@dataclass(frozen=True, kw_only=True)
class ProgressiveResizeSettings:
    progressive_resize: bool = declare("downscale training batches early in training", kind=RECIPE)
    resize_initial_scale: float = declare("side scale until resize_start_fraction", kind=RECIPE)
    resize_start_fraction: float = declare("share of training at the initial scale", kind=RECIPE)
    resize_finish_fraction: float = declare("share of training at which full size is reached", kind=RECIPE)
    resize_multiple: int = declare("the side is rounded to a multiple of this", admits=AT_LEAST_1, kind=RECIPE)
    resize_granularity: ResizeGranularity = declare("epoch: the side changes at epoch boundaries; step: every "
                                                    "step", kind=RECIPE)
    resize_mode: ResizeMode = declare("interpolation of the downscaling: nearest, bilinear or area", kind=RECIPE)


def _problem(c: ProgressiveResizeSettings) -> str | None:
    if 0 < c.resize_initial_scale <= 1 and 0 <= c.resize_start_fraction <= c.resize_finish_fraction <= 1:
        return None
    return ("progressive resizing needs 0 < resize_initial_scale <= 1 and "
            "0 <= resize_start_fraction <= resize_finish_fraction <= 1")


PROGRESSIVE_RESIZE = Method("progressive_resize", False,
                            lambda c: f"progressive resizing (from {c.resize_initial_scale:g}x)",
                            settings=ProgressiveResizeSettings, problem=_problem)
