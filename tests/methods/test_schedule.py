"""submission.methods.schedule: the learning rate's linear warm-up, then cosine decay."""
import pytest

from submission.methods import schedule


def test_lr_schedule_warmup_then_cosine():
    peak, total, warmup = 2.048, 1000, 100
    assert schedule.lr_at(0, total, warmup, peak, 0.0) == 0.0
    assert schedule.lr_at(50, total, warmup, peak, 0.0) == pytest.approx(peak / 2)
    assert schedule.lr_at(100, total, warmup, peak, 0.0) == pytest.approx(peak)
    assert schedule.lr_at(550, total, warmup, peak, 0.0) == pytest.approx(peak / 2)
    assert schedule.lr_at(1000, total, warmup, peak, 0.0) == pytest.approx(0.0, abs=1e-12)


def test_lr_schedule_decays_to_the_final_fraction():
    """Composer's alpha_f: the cosine runs from the peak to alpha_f x peak; the warm-up is unchanged."""
    peak, total, warmup, final = 2.0, 1000, 100, 0.1
    assert schedule.lr_at(50, total, warmup, peak, final) == pytest.approx(1.0)
    assert schedule.lr_at(100, total, warmup, peak, final) == pytest.approx(peak)
    assert schedule.lr_at(550, total, warmup, peak, final) == pytest.approx(peak * (0.1 + 0.9 * 0.5))
    assert schedule.lr_at(1000, total, warmup, peak, final) == pytest.approx(0.2)
    assert schedule.lr_at(5000, total, warmup, peak, final) == pytest.approx(0.2)
