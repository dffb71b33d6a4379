"""AUROC with ties on exact values (issue 20 item 4): trajectory confidences C = Phi(c_1:T) that are equal in
exact arithmetic must tie, whatever order the steps were summed or multiplied in (auq/metrics.py), and a
method's per-problem confidences tie to TIE_DECIMALS places (harness/calibration.py)."""
from __future__ import annotations

import random
from fractions import Fraction

import pytest

from agentic_repro.auq.metrics import Trajectory, aggregate, aggregate_exact, auroc, calibration_report, exact
from agentic_repro.harness.calibration import TIE_DECIMALS, calibration_metrics


def _mann_whitney(pos, neg):
    """The definition, pair by pair, on exact values: P(C_success > C_failure) + 1/2 P(=)."""
    wins = sum(Fraction(1) if p > q else Fraction(1, 2) if p == q else Fraction(0) for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


def test_float_summation_order_no_longer_breaks_a_tie():
    # the same three confidences in two orders: float means 0.20000000000000004 vs 0.19999999999999998
    assert sum([0.1, 0.2, 0.3]) / 3 != sum([0.3, 0.2, 0.1]) / 3
    trajs = [Trajectory(True, (0.1, 0.2, 0.3)), Trajectory(False, (0.3, 0.2, 0.1))]
    rep = calibration_report(trajs)
    assert rep["phi"]["avg"]["auroc"] == 0.5          # a tie counts 1/2 (float ranks gave 1.0)
    assert aggregate((0.1, 0.2, 0.3), "avg") == aggregate((0.3, 0.2, 0.1), "avg") == 0.2
    assert aggregate_exact((0.1, 0.2, 0.3), "avg") == Fraction(1, 5)


def test_hand_computed_mann_whitney_with_ties():
    """Successes: avg(0.1,0.2,0.3)=0.2, avg(0.7,0.9)=0.8, avg(0.6,0.3)=0.45; failures: avg(0.3,0.2,0.1)=0.2,
    avg(0.9,0.7)=0.8, avg(0.4)=0.4. Pairs (s, f), s beats f: 0.2 vs (0.2 tie, 0.8 loss, 0.4 loss) = 1/2;
    0.8 vs (0.2 win, 0.8 tie, 0.4 win) = 2.5; 0.45 vs (0.2 win, 0.8 loss, 0.4 win) = 2. AUROC = 5/9."""
    trajs = [Trajectory(True, (0.1, 0.2, 0.3)), Trajectory(True, (0.7, 0.9)), Trajectory(True, (0.6, 0.3)),
             Trajectory(False, (0.3, 0.2, 0.1)), Trajectory(False, (0.9, 0.7)), Trajectory(False, (0.4,))]
    assert calibration_report(trajs, phis=("avg",))["phi"]["avg"]["auroc"] == float(Fraction(5, 9))
    # the product: 0.9*0.8*0.7 in any order is 0.504; 0.3*0.6 vs 0.6*0.3 tie too
    prod = [Trajectory(True, (0.9, 0.8, 0.7)), Trajectory(False, (0.7, 0.8, 0.9)), Trajectory(False, (0.1,))]
    assert calibration_report(prod, phis=("prod",))["phi"]["prod"]["auroc"] == 0.75


def test_auroc_equals_exact_pairwise_arithmetic_on_shuffled_trajectories():
    """140 trajectories whose steps are permutations of few confidences (many exact ties between means):
    AUROC equals the pairwise definition on exact means, for every Phi."""
    rng = random.Random(7)
    base = [(0.1, 0.2, 0.3, 0.7), (0.05, 0.15, 0.85), (0.3, 0.6, 0.9), (0.45, 0.55), (0.35, 0.65, 0.95, 0.05)]
    trajs = []
    for i in range(140):
        steps = list(base[i % len(base)])
        rng.shuffle(steps)
        trajs.append(Trajectory(rng.random() < 0.5, tuple(steps)))
    rep = calibration_report(trajs)
    for phi in ("last", "avg", "min", "prod"):
        vals = []
        for t in trajs:
            cs = [Fraction(str(c)) for c in t.confidences]
            vals.append({"last": cs[-1], "avg": sum(cs) / len(cs), "min": min(cs),
                         "prod": __import__("math").prod(cs)}[phi])
        pos = [v for v, t in zip(vals, trajs) if t.success]
        neg = [v for v, t in zip(vals, trajs) if not t.success]
        assert rep["phi"][phi]["auroc"] == float(_mann_whitney(pos, neg)), phi


def test_exact_reads_a_float_as_the_decimal_it_prints_as():
    assert exact(0.85) == Fraction(17, 20) and exact(1) == 1 and exact(Fraction(1, 3)) == Fraction(1, 3)
    for bad in (1.2, -0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="not in"):
            exact(bad)
    assert auroc([Fraction(1, 3), 0.2], [True, False]) == 1.0


def test_runner_calibration_ties_to_tie_decimals():
    """harness/calibration.py: a method's mean confidences, equal but summed in another order, tie."""
    a, b = sum([0.1, 0.2, 0.3]) / 3, sum([0.3, 0.2, 0.1]) / 3
    assert a != b and round(a, TIE_DECIMALS) == round(b, TIE_DECIMALS)
    m = calibration_metrics([a, b], [1.0, 0.0])
    assert m["auroc"] == 0.5
    # and the pairwise value on a larger hand case: successes 0.2, 0.7; failures 0.2 (other order), 0.1
    m = calibration_metrics([a, 0.7, b, 0.1], [1.0, 1.0, 0.0, 0.0])
    assert m["auroc"] == (0.5 + 1 + 1 + 1) / 4
    # the ECE bin: 0.7 summed as (0.5+0.9+0.7)/3 = 0.6999999999999998 belongs to the bin [0.7, 0.8)
    m = calibration_metrics([(0.5 + 0.9 + 0.7) / 3], [1.0])
    assert [(b["lo"], b["n"]) for b in m["bins"]] == [(0.7, 1)]


def test_runner_calibration_bin_convention_on_a_005_grid():
    """harness/calibration.py's ECE with both edge conventions: 0.85 (wrong) and 0.9 (right) are two bins
    left-closed (0.475) and one bin (0.8, 0.9] right-closed (0.375); 0.0 and 1.0 stay in range either way."""
    left = calibration_metrics([0.85, 0.9], [0.0, 1.0])
    right = calibration_metrics([0.85, 0.9], [0.0, 1.0], convention="right_closed")
    assert left["ece"] == pytest.approx(0.475) and right["ece"] == pytest.approx(0.375)
    assert [b["n"] for b in right["bins"]] == [2] and right["bin_convention"] == "right_closed"
    edge = calibration_metrics([0.0, 1.0], [0.0, 1.0], convention="right_closed")
    assert sum(b["n"] for b in edge["bins"]) == 2 and edge["ece"] == 0.0
    with pytest.raises(ValueError):
        calibration_metrics([0.5], [1.0], convention="middle")
