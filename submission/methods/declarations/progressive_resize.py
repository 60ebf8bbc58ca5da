"""Progressive resizing's declaration (its code: methods/progressive_resize.py)."""
from dataclasses import dataclass

from ...setting_declaration import AT_LEAST_1, RECIPE, setting
from ..method import Method


@dataclass(frozen=True, kw_only=True)
class ProgressiveResizeSettings:
    progressive_resize: bool = setting(RECIPE, "downscale training batches early in training")
    resize_initial_scale: float = setting(RECIPE, "side scale until resize_start_fraction")
    resize_start_fraction: float = setting(RECIPE, "share of training at the initial scale")
    resize_finish_fraction: float = setting(RECIPE, "share of training at which full size is reached")
    resize_multiple: int = setting(RECIPE, "the side is rounded to a multiple of this", admits=AT_LEAST_1)
    resize_granularity: str = setting(RECIPE, "epoch: the side changes at epoch boundaries; step: every step",
                                      admits=("epoch", "step"))
    resize_mode: str = setting(RECIPE, "interpolation of the downscaling: nearest, bilinear or area",
                               admits=("nearest", "bilinear", "area"))


def _problem(c) -> str | None:
    if 0 < c.resize_initial_scale <= 1 and 0 <= c.resize_start_fraction <= c.resize_finish_fraction <= 1:
        return None
    return ("progressive resizing needs 0 < resize_initial_scale <= 1 and "
            "0 <= resize_start_fraction <= resize_finish_fraction <= 1")


PROGRESSIVE_RESIZE = Method("progressive_resize", False,
                            lambda c: f"progressive resizing (from {c.resize_initial_scale:g}x)",
                            settings=ProgressiveResizeSettings, problem=_problem)
