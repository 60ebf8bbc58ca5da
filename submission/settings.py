"""`python -m submission settings [recipe=NAME]`: every setting, its value and meaning, and
the schedule the recipe's settings give the published run (the RunPlan the loop follows)."""
from __future__ import annotations

from .config import (CHOICES, HARNESS_SETTINGS, RANGES, RECIPE_SETTINGS, RESOLVED_CHOICES, Config,
                     load_recipe)
from .data.sources import PUBLISHED_SPLIT_SIZES
from .step import RunPlan


def describe_settings(recipe_name: str | None = None) -> str:
    """Every setting with its value in the recipe, or its default, and its meaning."""
    recipe_name = recipe_name or HARNESS_SETTINGS["recipe"][0]
    recipe = load_recipe(recipe_name)
    lines = [f"Recipe settings (submission/recipes/{recipe_name}.yaml, with their published sources "
             "in its comments):"]
    lines += [f"  {key} = {recipe[key]!r}  -- {meaning}{_admits(key)}"
              for key, (_, meaning) in RECIPE_SETTINGS.items()]
    lines += ["\nDerived from them:"] + derived_schedule(recipe_name, recipe)
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
    lines = [f"  train_epochs = {config.train_epochs:g}  -- epochs x scale_schedule_ratio"
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
        lines.append(f"  training sides = {', '.join(map(str, plan.sides()))}  -- in order, {changes}")
    return lines
