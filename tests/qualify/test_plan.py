"""submission.qualify.plan: the parts in order of value, estimates that learn from what was
measured, and a part left out when it would not end inside the budget."""
from __future__ import annotations

from submission.qualify import plan


def test_every_recipes_eager_profile_and_the_campaign_come_before_any_compiled_part():
    names = [part.name for part in plan.parts("cuda")]
    assert names[:4] == ["bench mild", "campaign of 2 runs (mild)", "bench medium", "bench hot"]
    assert names[4:] == ["bench mild compiled + CUDA graphs", "bench medium compiled + CUDA graphs",
                         "bench hot compiled + CUDA graphs", "bench mild compiled"]
    assert [p.key for p in plan.parts("cpu")] == ["mild", "campaign", "medium", "hot"]
    assert [p.name for p in plan.parts("cpu", ("hot",))] == ["bench hot", "campaign of 2 runs (hot)"]


def test_estimates_start_from_the_priors_and_learn_from_the_parts_measured():
    scale = plan.SCALES["cuda"]
    estimates = plan.Estimates(scale)
    mild, campaign, medium, compiled, hot_compiled = (plan.parts("cuda")[i] for i in (0, 1, 2, 4, 6))
    assert estimates.of(mild) == scale.bench_prior_s
    assert estimates.of(compiled) == scale.bench_prior_s + scale.compile_prior_s
    estimates.learn(mild, 100.0)
    assert estimates.of(campaign) == 100.0 * scale.campaign_factor
    assert estimates.of(medium) == 100.0 * plan.BENCH_FACTOR["medium"]
    estimates.learn(compiled, 130.0)                   # compiling added 30 s to Mild's bench
    assert estimates.of(hot_compiled) == 100.0 * plan.BENCH_FACTOR["hot"] + 30.0


def test_a_part_fits_only_with_the_records_seconds_kept_back():
    assert plan.fits(50.0, 50.0 + plan.RECORD_RESERVE_S)
    assert not plan.fits(50.0, 50.0 + plan.RECORD_RESERVE_S - 1)
