"""submission/data/progress_meter.py: the one-line meter of the image check."""
from __future__ import annotations

from submission.data import progress_meter


def test_the_meter_redraws_one_line_at_most_every_2_s_and_ends_it(capsys, monkeypatch):
    now = [100.0]
    monkeypatch.setattr(progress_meter.time, "monotonic", lambda: now[0])
    meter = progress_meter.ProgressMeter("checking images", 30)
    now[0] += 1.0
    meter.advance(10)               # 1 s after the start: not drawn
    assert capsys.readouterr().err == ""
    now[0] += 1.0
    meter.advance(10)
    assert capsys.readouterr().err == "\rchecking images: 20/30 (10/s, ETA 1s)"
    now[0] += 0.5
    meter.advance(10)               # the last: drawn whatever the time
    assert capsys.readouterr().err == "\rchecking images: 30/30 (12/s, ETA 0s)"
    meter.done()
    assert capsys.readouterr().err == "\rchecking images: 30/30 in 2.5s\n"
