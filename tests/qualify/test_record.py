"""submission.qualify.record: the campaign's verdict beside chance, and qualify's last line, a
sentence that says what was measured, whether the recipe learned and what to do next."""
from __future__ import annotations

from pathlib import Path

from submission.qualify import plan, record

PATH = Path("/results/qualify/local-20261128/qualify.md")


def _run(name: str, first: float | None, last: float | None) -> record.CampaignRun:
    return record.CampaignRun(name, "aborted", 0.5, None, None, None, [], first, last,
                              0 if last is None else 3, 36)


def _qualification(parts, campaign=None, interrupted="") -> record.Qualification:
    return record.Qualification("CPU", "cpu", "host", "2026-11-28", "abc", "2.14.1", 5.0, 4.2, "data", {},
                                parts, campaign=campaign, interrupted=interrupted)


def _campaign(*runs: record.CampaignRun) -> record.CampaignFigures:
    learned, verdict = record.verdict(list(runs), 4)
    return record.CampaignFigures("f", list(runs), None, "not measured", "", 4, "", learned, verdict)


def test_the_verdict_holds_every_runs_last_evaluation_against_chance():
    learned, verdict = record.verdict([_run("result_0", 0.25, 0.9), _run("result_1", 0.3, 0.75)], 4)
    assert learned is True
    assert verdict == ("the recipe learned on this machine (top-1 at the first -> last evaluation: result_0 "
                       "0.250 -> 0.900; result_1 0.300 -> 0.750; chance 0.250 (4 classes))")
    # one run at chance: the machine did not learn, and what to check is said
    at_chance = 0.25 * plan.LEARNED_OVER_CHANCE - 0.01
    learned, verdict = record.verdict([_run("result_0", 0.25, 0.9), _run("result_1", 0.25, at_chance)], 4)
    assert learned is False
    assert verdict.startswith("the recipe did NOT learn on this machine: result_1 ended below 1.5x chance")
    assert all(word in verdict for word in ("Check the data", "the driver", "precision=fp32"))
    assert record.verdict([_run("result_0", None, None)], 4) == (None, "not judged: no run of the campaign "
                                                                       "evaluated its model")


def test_the_last_line_says_what_to_do_next():
    done = record.PartOutcome("bench mild", "", record.DONE, 70, 75)
    left = record.PartOutcome("bench medium", "", record.LEFT_OUT, 105)
    failed = record.PartOutcome("bench hot", "", record.FAILED, 80, 3, "exit code 1")
    line = record.closing_line(_qualification([done, left, failed], _campaign(_run("result_0", 0.25, 0.8))), PATH)
    assert line.startswith("done in 4.20 min of 5: measured: bench mild; FAILED: bench hot; left out for the "
                           "budget: bench medium. The recipe learned here (last top-1 0.800, chance 0.250).")
    assert f"bench hot failed: {PATH.parent / record.LOG} says why." in line
    # 4.2 min done, 105 s estimated, 10 s for the record: 6.12 min
    assert "Give minutes=7 to measure bench medium." in line and line.endswith(f"The record: {PATH}")
    # a part stopped at the budget's end needs more than the seconds it had: 252 + 400 + 10 s
    stopped = record.PartOutcome("bench hot", "", record.STOPPED, 80, 400)
    assert "Give minutes=12 to measure bench hot." in record.closing_line(_qualification([done, stopped]), PATH)

    not_learned = _qualification([done], _campaign(_run("result_0", 0.25, 0.25)))
    assert "The recipe did NOT learn here: qualify.md's verdict says what to check." in \
        record.closing_line(not_learned, PATH)

    stopped = record.PartOutcome("campaign of 2 runs (mild)", "", record.INTERRUPTED, 140, note="by SIGTERM")
    not_run = record.PartOutcome("bench medium", "", record.NOT_RUN, 105, note="interrupted by SIGTERM")
    line = record.closing_line(_qualification([done, stopped, not_run], interrupted="SIGTERM"), PATH)
    assert line.startswith("interrupted by SIGTERM after 4.20 min of 5: measured: bench mild; interrupted: "
                           "campaign of 2 runs (mild); not run: bench medium. The same command again redoes "
                           "every part (the data are reused).")
    assert "minutes=" not in line
