"""`python -m submission settings [recipe=NAME] [scale_schedule_ratio=R]`: every setting as
submission/settings.py declares it (value in the recipe or default, meaning, what it admits), and
the schedule the recipe's settings give the published run (the RunPlan the loop follows)."""
from __future__ import annotations

from . import settings as declared
from .config import DEFAULT_RECIPE, Config, ConfigError, combination_problems, load_recipe, parse_overrides, ratio_range
from .data.sources import PUBLISHED_SPLIT_SIZES
from .run_plan import RunPlan
from .setting_declaration import Range
from .system_descriptor import SystemDescriptor

ACCEPTED = ("recipe", "scale_schedule_ratio")
SECTIONS = (
    (declared.HARNESS, "Harness settings (change what a run computes; a campaign resumes only "
                       "with the values it started with):"),
    (declared.OPERATIONAL, "Operational settings (what a run computes does not depend on them; they "
                           "may change when a campaign resumes):"),
)


def describe_settings(recipe_name: str | None = None, ratio: float | None = None) -> str:
    """Every setting with its value in the recipe, or its default, and its meaning; the
    derived schedule at `ratio` (default: the recipe's scale_schedule_ratio, else the ends of
    its published range that a run admits)."""
    recipe_name = recipe_name or DEFAULT_RECIPE
    recipe = load_recipe(recipe_name)
    published = ratio_range(recipe_name)
    if ratio is not None and published and not published.admits(ratio):
        raise ConfigError(f"scale_schedule_ratio={ratio:g} is outside the {recipe_name} recipe's "
                          f"published range: it must be {published}")
    lines = [f"Recipe settings (submission/recipes/{recipe_name}.yaml, with their published sources "
             "in its comments):"]
    lines += [_line(key, recipe[key]) for key in declared.names(declared.RECIPE)]
    if published:
        lines.append(f"  (published scale_schedule_ratio range of {recipe_name}: {published}, "
                     "checked on ImageNet)")
    lines += _schedules(recipe_name, recipe, ratio, published)
    for kind, title in SECTIONS:
        lines += ["", title]
        lines += [_line(key, recipe_name if key == "recipe" else declared.default(key))
                  for key in declared.names(kind)]
    return "\n".join(lines)


def _line(key: str, value: object) -> str:
    admits = declared.admits_text(key)
    return f"  {key} = {value!r}  -- {declared.meaning(key)}{'; ' + admits if admits else ''}"


def _schedules(recipe_name: str, recipe: dict, ratio: float | None, published: Range | None) -> list[str]:
    """The derived schedule at `ratio`, the recipe's own ratio, or the admitted ends of its range."""
    if ratio is not None or recipe["scale_schedule_ratio"] is not None:
        value = ratio if ratio is not None else recipe["scale_schedule_ratio"]
        return ["", "Derived from them:"] + derived_schedule(
            recipe_name, {**recipe, "scale_schedule_ratio": value})
    assert published is not None, "a recipe without scale_schedule_ratio has its published range"
    ends = [end for end, is_open in ((published.low, published.low_open),
                                     (published.high, published.high_open))
            if end is not None and not is_open]
    ask = (f"`settings recipe={recipe_name} scale_schedule_ratio=R` shows the schedule of a run at "
           f"R {published}")
    if not ends:
        return ["", f"Derived from them: {recipe_name} leaves scale_schedule_ratio to you, as its "
                    f"published file does; {ask}."]
    lines = ["", f"Derived from them: {recipe_name} leaves scale_schedule_ratio to you, as its "
                 f"published file does; {ask}. At the end(s) of its range, "
                 f"{' and '.join(f'{end:g}' for end in ends)}:"]
    for end in ends:
        lines += derived_schedule(recipe_name, {**recipe, "scale_schedule_ratio": end})
    return lines


def derived_schedule(recipe_name: str, recipe: dict) -> list[str]:
    """The duration, warm-up, evaluations and training sides of the recipe's run on
    ImageNet at its reference global batch, as the training loop's RunPlan counts them."""
    images = PUBLISHED_SPLIT_SIZES["imagenet"][0]
    batch = recipe["lr_reference_batch"]
    config = Config.of(recipe_name, {**declared.defaults(), **recipe, "recipe": recipe_name,
                                     "batch_per_device": batch},
                       SystemDescriptor({"number_of_nodes": "1", "accelerators_per_node": "1"}))
    problems = [f"scale_schedule_ratio={config.scale_schedule_ratio:g} {problem}"
                for problem in [declared.problem("scale_schedule_ratio", config.scale_schedule_ratio)] if problem]
    problems += [] if problems else combination_problems(config)
    if problems:
        raise ConfigError(f"{recipe_name}: a run would refuse this schedule: " + "; ".join(problems))
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


def main(words: list[str]) -> str:
    """The text `settings` prints for its command-line words; a ConfigError naming each word
    it does not take."""
    given = parse_overrides(words)
    rejected = [f"{key}={value}" for key, value in given.items() if key not in ACCEPTED]
    if rejected:
        raise ConfigError(f"settings takes only recipe=NAME and scale_schedule_ratio=R, not "
                          f"{', '.join(rejected)} (`python -m submission run ... dry_run=true` prints "
                          "every setting as a run would resolve it)")
    given_ratio = given.get("scale_schedule_ratio")
    try:
        ratio = float(given_ratio) if given_ratio is not None else None
    except ValueError:
        raise ConfigError(f"scale_schedule_ratio takes a number, not {given_ratio!r}") from None
    return describe_settings(given.get("recipe"), ratio)
