"""The published tradeoff and ablation points of submission.published, selected by system."""
from __future__ import annotations

from submission import published


def test_points_select_by_system():
    cloud = published.points_for("a100-80gb")
    assert [(p.configuration, p.top1, p.minutes) for p in cloud] == [
        ("Mild (MLPerf v2.0 open)", 0.759, 23.8), ("Mosaic baseline (MLPerf v2.0 open)", 0.759, 110.5),
        ("Mild", 0.766, 25.3), ("Mild", 0.781, 52.4), ("Hot", 0.799, 255.0), ("Hot", 0.810, 880.0)]
    p4d = published.points_for("p4d")
    ffcv = [p for p in p4d if p.source == published.FFCV_IMAGENET]
    assert [(p.top1, p.minutes) for p in ffcv] == [(0.738, 14.9), (0.756, 21.7), (0.766, 28.7),
                                                   (0.772, 35.6), (0.780, 49.4), (0.784, 77.2)]
    assert {(p.configuration, p.minutes) for p in p4d} - {(p.configuration, p.minutes) for p in ffcv} \
        == {("Mild", 56.0), ("Medium", 60.4)}
    assert [(p.configuration, p.top1) for p in published.points_for("")] == [("Medium", 0.784), ("Hot", 0.800)]
    assert published.points_for("cpu") == []
    assert len(published.POINTS) == len(cloud) + len(p4d) + 2


def test_every_point_is_a_fraction_with_a_source_and_a_described_system():
    from conftest import REPO

    described = {path.stem for path in (REPO / "systems").glob("*.json")} | {""}
    for point in published.POINTS:
        assert 0.7 < point.top1 < 0.82 and point.minutes > 0 and point.runs >= 1
        assert point.system in described and point.source in (
            published.MLPERF_V2, published.MOSAIC_RESNET, published.FFCV_IMAGENET)


def test_ablations_keep_their_unit():
    def study(name):
        return [a for a in published.ABLATIONS if a.study == name]

    depth = study("NVIDIA-hyperparameter baseline + channels last, RandAugment depth")
    assert [(a.variant, a.img_per_s, a.minutes, a.top1) for a in depth] == [
        ("depth 0", 15422, None, None), ("depth 1", 12597, None, None), ("depth 2", 11108, None, None)]
    smoothing = study("Mild prototype, MixUp vs label smoothing")
    assert [(a.top1, a.img_per_s, a.minutes) for a in smoothing] == [
        (0.7591, 18043, None), (0.7604, 18527, None), (0.7633, 19086, None)]
    cutmix = study("Hot prototype, CutMix vs MixUp")
    assert [(a.epochs, a.variant, a.top1, a.minutes) for a in cutmix] == [
        (180, "CutMix", 0.7885, 279), (180, "MixUp", 0.7956, 242),
        (540, "CutMix", 0.8021, 932), (540, "MixUp", 0.8069, 880)]
    assert len(published.ABLATIONS) == 24
    assert {(a.system, a.source) for a in published.ABLATIONS} == {("a100-80gb", published.MOSAIC_ABLATIONS)}


def test_the_earlier_figures_are_unchanged():
    assert len(published.TIMES) == 9 and len(published.THROUGHPUTS) == 4
    assert published.sources() == [published.MLPERF_V2, published.MLPERF_V2_NVIDIA,
                                   published.MOSAIC_RESNET, published.MOSAIC_DEEP_DIVE]
