"""`python -m submission settings [recipe=NAME] [scale_schedule_ratio=R]`: every setting, its
value and meaning, and the schedule the recipe's settings give the published run (the
RunPlan the loop follows)."""
from __future__ import annotations

from .config import (CHOICES, HARNESS_SETTINGS, RANGES, RECIPE_SETTINGS, RESOLVED_CHOICES, Config,
                     ConfigError, load_recipe, ratio_range)
from .data.sources import PUBLISHED_SPLIT_SIZES
from .step import RunPlan


def describe_settings(recipe_name: str | None = None, ratio: float | None = None) -> str:
    """Every setting with its value in the recipe, or its default, and its meaning; the
    derived schedule at `ratio` (default: the recipe's scale_schedule_ratio)."""
    recipe_name = recipe_name or HARNESS_SETTINGS["recipe"][0]
    recipe = load_recipe(recipe_name)
    published = ratio_range(recipe_name)
    if ratio is not None and published and not published.admits(ratio):
        raise ConfigError(f"scale_schedule_ratio={ratio:g} is outside the {recipe_name} recipe's "
                          f"published range: it must be {published}")
    lines = [f"Recipe settings (submission/recipes/{recipe_name}.yaml, with their published sources "
             "in its comments):"]
    lines += [f"  {key} = {recipe[key]!r}  -- {meaning}{_admits(key)}"
              for key, (_, meaning) in RECIPE_SETTINGS.items()]
    if published:
        lines.append(f"  (published scale_schedule_ratio range of {recipe_name}: {published}, "
                     "checked on ImageNet)")
    ratios = [ratio] if ratio is not None else [recipe["scale_schedule_ratio"]]
    if ratios == [None]:
        ends = [end for end in (published.low, published.high) if end]
        lines.append(f"\nDerived from them: {recipe_name} leaves scale_schedule_ratio to you "
                     f"({published}); `settings recipe={recipe_name} scale_schedule_ratio=R` "
                     f"shows one; the range's end(s) {' and '.join(f'{end:g}' for end in ends)}:")
        ratios = ends
    else:
        lines.append("\nDerived from them:")
    for value in ratios:
        lines += derived_schedule(recipe_name, {**recipe, "scale_schedule_ratio": value})
    lines.append("\nHarness settings:")
    lines += [f"  {key} = {default!r}  -- {meaning}{_admits(key)}"
              for key, (default, meaning) in HARNESS_SETTINGS.items()]
    return "\n".join(lines)


def _admits(key: str) -> str:
    if key in RANGES:
        return f"; {RANGES[key]}"
    if key in CHOICES:
        return f"; one of {', '.join(c for c in CHOICES[key] + RESOLVED_CHOICES.get(key, ()) if c)}"
    return ""


def derived_schedule(recipe_name: str, recipe: dict) -> list[str]:
    """The duration, warm-up, evaluations and training sides of the recipe's run on
    ImageNet at its reference global batch, as the training loop's RunPlan counts them."""
    images = PUBLISHED_SPLIT_SIZES["imagenet"][0]
    batch = recipe["lr_reference_batch"]
    settings = {key: default for key, (default, _) in HARNESS_SETTINGS.items()}
    config = Config(recipe_name, {**settings, **recipe, "batch_per_device": batch},
                    {"number_of_nodes": "1", "accelerators_per_node": "1"})
    plan = RunPlan.of(config, images, world_size=1)
    lines = [f"  scale_schedule_ratio = {config.scale_schedule_ratio:g}; methods: "
             f"{', '.join(config.methods) or 'none'}",
             f"  train_epochs = {config.train_epochs:g}  -- epochs x scale_schedule_ratio"
             + (", truncated to whole epochs" if config.whole_epochs else ""),
             f"  warmup_train_epochs = {config.warmup_train_epochs:g}  -- warmup_epochs"
             + (" x scale_schedule_ratio" if config.scale_warmup else ", not scaled"),
             f"  on ImageNet ({images:,} training images) at global batch {batch}: "
             f"{plan.steps_per_epoch} steps an epoch, {plan.total_steps:,} steps, warm-up "
             f"{plan.warmup_steps:,} steps, {plan.evaluations_until(plan.total_steps)} evaluations "
             f"(every {plan.eval_every:,} steps)"]
    if config.progressive_resize:
        changes = ("changing at epoch boundaries" if config.resize_granularity == "epoch"
                   else "changing between steps")
        lines.append(f"  training sides = {', '.join(map(str, plan.sides()))}  -- in order, {changes}"
                     + (f"; ColOut crops {config.train_resolution} to {plan.full_side} first"
                        if config.colout_fraction else ""))
    if config.sam_interval:
        lines.append(f"  SAM steps = {plan.sam_steps():,} of {plan.total_steps:,}  -- every "
                     f"{config.sam_interval}th step takes two forward and backward passes: "
                     f"{plan.total_steps + plan.sam_steps():,} passes in all")
    return lines
