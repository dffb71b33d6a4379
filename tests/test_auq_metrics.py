"""AUQ's trajectory metrics on hand-computed cases (auq/metrics.py)."""
from __future__ import annotations

import pytest

from agentic_repro.auq.metrics import (Trajectory, aggregate, auroc, bin_index, calibration_report, step_confidences, t_brier,
                         t_ece, trajectory_of)


def test_aggregations_hand_computed():
    cs = [0.9, 0.5, 0.8]
    assert aggregate(cs, "last") == 0.8
    assert aggregate(cs, "avg") == pytest.approx(2.2 / 3)
    assert aggregate(cs, "min") == 0.5
    assert aggregate(cs, "prod") == pytest.approx(0.36)


def test_missing_confidences_are_skipped_or_drop_the_trajectory_never_read_as_0_or_1():
    cs = [0.9, None, 0.5, 0.8, None]
    assert aggregate(cs, "last") == 0.8          # the last step that has one
    assert aggregate(cs, "avg") == pytest.approx(2.2 / 3)
    assert aggregate(cs, "min") == 0.5           # not 0.0
    assert aggregate(cs, "prod") == pytest.approx(0.36)  # not 0.0
    for phi in ("last", "avg", "min", "prod"):
        assert aggregate(cs, phi, missing="drop_trajectory") is None
        assert aggregate([None, None], phi) is None
        assert aggregate([], phi) is None
    with pytest.raises(ValueError):
        aggregate([1.2], "avg")                  # out of range: a parser bug, not a value to clip
    with pytest.raises(ValueError):
        aggregate([0.5], "median")


def test_equal_width_bins_last_closed():
    assert [bin_index(c) for c in (0.0, 0.05, 0.1, 0.3, 0.7, 0.999, 1.0)] == [0, 0, 1, 3, 7, 9, 9]


def test_ece_brier_auroc_hand_computed():
    conf, y = [0.95, 0.15, 0.55, 0.65], [True, False, True, False]
    # four singleton bins: (|1-.95| + |0-.15| + |1-.55| + |0-.65|) / 4
    assert t_ece(conf, y) == pytest.approx(1.3 / 4)
    assert t_brier(conf, y) == pytest.approx((0.05 ** 2 + 0.15 ** 2 + 0.45 ** 2 + 0.65 ** 2) / 4)
    # positive/negative pairs: .95>.15, .95>.65, .55>.15, .55<.65 -> 3/4
    assert auroc(conf, y) == pytest.approx(0.75)
    # two in one bin: acc 0.5 vs mean conf 0.85
    assert t_ece([0.81, 0.89], [True, False]) == pytest.approx(0.35)
    # ties count one half
    assert auroc([0.5, 0.5], [True, False]) == pytest.approx(0.5)
    assert auroc([0.9, 0.2], [True, True]) is None
    # ties across and within classes: pairs (s, f): (.7,.7)=.5 (.7,.2)=1 (.7,.7)=.5 (.7,.2)=1 (.3,.7)=0 (.3,.2)=1
    assert auroc([0.7, 0.7, 0.3, 0.7, 0.2], [True, True, True, False, False]) == pytest.approx(4 / 6)


def test_report_counts_exclusions_and_sr_uses_every_trajectory():
    trajs = [Trajectory(True, (0.9, 1.0)), Trajectory(False, (0.6, None)), Trajectory(True, (None, None)),
             Trajectory(False, ())]
    rep = calibration_report(trajs)
    assert rep["n"] == 4 and rep["success_rate"] == 0.5
    assert rep["missing_steps"] == 3 and rep["no_confidence"] == 2 and rep["with_missing"] == 2
    assert rep["ece_bins"] == "10 equal-width"
    last = rep["phi"]["last"]
    assert last["n"] == 2 and rep["excluded"]["last"] == 2
    # C = [1.0 (success), 0.6 (failure)] -> ECE (|1-1| + |0-.6|)/2
    assert last["t_ece"] == pytest.approx(0.3) and last["t_bs"] == pytest.approx(0.18) and last["auroc"] == 1.0
    assert rep["phi"]["prod"]["t_bs"] == pytest.approx(((0.9 - 1) ** 2 + 0.6 ** 2) / 2)
    drop = calibration_report(trajs, missing="drop_trajectory")
    assert drop["phi"]["min"]["n"] == 1 and drop["phi"]["min"]["auroc"] is None
    assert "one class" in drop["phi"]["min"]["auroc_reason"]
    empty = calibration_report([Trajectory(True, (None,))])
    assert empty["phi"]["avg"]["t_ece"] is None and empty["success_rate"] == 1.0


def test_reads_confidences_from_a_prediction_record():
    pred = {"id": "g0", "score": 1.0, "episodes": [{"trajectory": [
        {"event": "reset", "step": 0},
        {"event": "step", "step": 1, "extra": {"confidence": 0.7}},
        {"event": "note", "step": 1, "extra": {"reflection": "x"}},
        {"event": "step", "step": 2, "extra": {"confidence": None}},
        {"event": "step", "step": 3},
        {"event": "note", "step": 3, "extra": {"wasted": True, "confidence": 0.4}}]}]}
    assert step_confidences(pred) == [0.7, None, None, 0.4]
    t = trajectory_of(pred)
    assert t.success and t.n_missing == 2 and t.id == "g0"


def test_bin_conventions_on_a_005_grid():
    """Confidences on the 0.05 grid verbalised confidences use: every 0.1 multiple is a bin edge, so the
    convention regroups them. C = 0.85 (failure) and 0.9 (success): left-closed puts them in bins 8 and 9,
    |0 - 0.85|/2 + |1 - 0.9|/2 = 0.475; right-closed puts both in (0.8, 0.9]: |0.5 - 0.875| = 0.375."""
    grid = [i / 20 for i in range(21)]
    left = [bin_index(c, 10, "left_closed") for c in grid]
    right = [bin_index(c, 10, "right_closed") for c in grid]
    assert left == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 9]
    assert right == [0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9]
    assert t_ece([0.85, 0.9], [False, True], 10, "left_closed") == pytest.approx(0.475)
    assert t_ece([0.85, 0.9], [False, True], 10, "right_closed") == pytest.approx(0.375)
    with pytest.raises(ValueError):
        bin_index(0.5, 10, "closed")
    trajs = [Trajectory(False, (0.85,)), Trajectory(True, (0.9,))]
    rep = calibration_report(trajs, phis=("last",), convention="right_closed")
    assert rep["bin_convention"] == "right_closed" and rep["bin_convention_other"] == "left_closed"
    assert rep["phi"]["last"]["t_ece"] == pytest.approx(0.375) and rep["phi"]["last"]["t_ece_other"] == pytest.approx(0.475)
    assert [b["count"] for b in rep["phi"]["last"]["bins"]][8] == 2
    assert calibration_report(trajs, phis=("last",))["phi"]["last"]["t_ece"] == pytest.approx(0.475)   # default
