"""submission.methods.schedule: the learning rate's linear warm-up, then cosine decay."""
import pytest

from submission.methods import schedule


def test_lr_schedule_warmup_then_cosine():
    peak, total, warmup = 2.048, 1000, 100
    assert schedule.lr_at(0, total, warmup, peak) == 0.0
    assert schedule.lr_at(50, total, warmup, peak) == pytest.approx(peak / 2)
    assert schedule.lr_at(100, total, warmup, peak) == pytest.approx(peak)
    assert schedule.lr_at(550, total, warmup, peak) == pytest.approx(peak / 2)
    assert schedule.lr_at(1000, total, warmup, peak) == pytest.approx(0.0, abs=1e-12)
