"""The regression gate on constructed baselines: improved, unchanged within noise, regressed, and what it refuses."""
from __future__ import annotations

import numpy as np
import pytest

from helpers.compare_fakes import record, results_of
from sbprof.analysis.gate import WITHIN_RUN, describe_row, gate, min_runs
from sbprof.base.errors import ConfigError

# Run levels spread like between-process noise here (CV ~5-10%); calls scatter +-1% inside a run.
LEVELS = [0.92, 0.95, 0.98, 1.0, 1.01, 1.03, 1.06, 1.09]
INSIDE = [0.99, 1.0, 1.01, 0.995, 1.005]


def runs(scale=1.0, levels=LEVELS, variant="v", x=2.0, order=1):
    return [record(variant, x, r, [0.1 * scale * level * f for f in INSIDE])
            for r, level in enumerate(levels[::order])]


def verdict(base, new, **kw):
    row, = gate(results_of(base), results_of(new), **kw).rows
    return row


@pytest.mark.parametrize("scale, expected", [(0.7, "improved"), (1.3, "regressed")])
def test_clear_changes_are_called(scale, expected):
    row = verdict(runs(), runs(scale))
    assert row.status == expected and row.verdict.ratio == pytest.approx(scale)
    assert (row.baseline_runs, row.candidate_runs) == (8, 8)


def test_unchanged_code_with_run_to_run_noise_is_unchanged():
    row = verdict(runs(), runs(1.0, order=-1))  # same levels, other order: identical distributions
    assert row.status == "unchanged" and "includes 1" in row.verdict.reason


def test_ratio_is_the_median_of_pairwise_ratios_of_run_medians():
    shuffled = [1.04, 0.9, 1.12, 0.97, 1.0, 1.07, 0.93, 1.02]
    row = verdict(runs(), runs(1.1, levels=shuffled))
    base = np.median(np.array([[0.1 * lv * f for f in INSIDE] for lv in LEVELS]), axis=1)
    new = np.median(np.array([[0.11 * lv * f for f in INSIDE] for lv in shuffled]), axis=1)
    ratios = np.sort((new[:, None] / base[None, :]).ravel())
    assert row.verdict.ratio == pytest.approx(np.sqrt(ratios[31] * ratios[32]))  # 64 ratios: middle two


def test_a_real_change_within_the_threshold_is_not_a_regression():
    tight = [1.0, 1.001, 0.999, 1.0005, 0.9995, 1.0002, 0.9998, 1.0001]
    row = verdict(runs(levels=tight), runs(1.03, levels=tight), threshold=0.05)
    assert row.status == "unchanged" and "within the 5% threshold" in row.verdict.reason
    assert verdict(runs(levels=tight), runs(1.03, levels=tight), threshold=0.02).status == "regressed"


def test_too_few_runs_are_not_judged_unless_asked_for_a_labelled_within_run_comparison():
    report = gate(results_of(runs(levels=LEVELS[:2])), results_of(runs(1.3, levels=LEVELS[:2])))
    row, = report.rows
    assert row.status == "too few runs" and row.verdict is None and report.unjudged == [row]
    assert "needs 4 a side" in describe_row(row)
    fallback, = gate(results_of(runs(levels=LEVELS[:2])), results_of(runs(1.3, levels=LEVELS[:2])),
                     within_run=True).rows
    assert fallback.status == "regressed" and fallback.method == WITHIN_RUN
    assert (fallback.verdict.baseline_runs, fallback.verdict.candidate_runs) == (10, 10)  # calls, not runs
    assert "WITHIN" not in describe_row(row) and "within-run" in describe_row(fallback)


def test_within_run_fallback_cries_wolf_where_the_run_level_gate_does_not():
    # Two processes a side whose levels differ by 8% (ordinary here): the calls alone look like a change.
    base, new = runs(levels=[0.96, 0.98]), runs(levels=[1.04, 1.06])
    assert verdict(base, new, within_run=True).status == "regressed"
    wide = runs(levels=LEVELS)
    assert verdict(wide, runs(levels=[LEVELS[i] for i in (1, 3, 5, 7, 0, 2, 4, 6)])).status == "unchanged"


def test_a_cell_that_fails_now_is_a_regression_and_one_that_runs_now_an_improvement():
    failing = [record("v", 2.0, r, [], status="oom") for r in range(4)]
    assert verdict(runs(), failing).status == "regressed"
    assert verdict(failing, runs()).status == "improved"


def test_peak_memory_is_judged_from_one_peak_per_run():
    base = [record("v", 2.0, r, [0.1], peak=int(1e9 * lv)) for r, lv in enumerate(LEVELS)]
    heavy = [record("v", 2.0, r, [0.1], peak=int(1.2e9 * lv)) for r, lv in enumerate(LEVELS)]
    row = verdict(base, heavy, metric="peak_memory")
    assert row.status == "regressed" and row.verdict.ratio == pytest.approx(1.2, rel=1e-6)
    with pytest.raises(ConfigError, match="metric must be one of rtf, peak_memory"):
        verdict(base, heavy, metric="latency")


def test_cells_are_matched_on_all_coordinates_but_the_run():
    report = gate(results_of(runs() + runs(x=4.0)), results_of(runs(1.3) + runs(variant="w")))
    assert [r.status for r in report.rows] == ["regressed"]
    assert report.only_baseline == ["m (v) cpu/1t 4 s x1"] and report.only_candidate == ["m (w) cpu/1t 2 s x1"]
    with pytest.raises(ConfigError, match="share no cell"):
        gate(results_of(runs()), results_of(runs(variant="w")))


def test_other_hardware_is_refused_unless_asked_and_differences_are_listed():
    other = {"hostname": "box2", "cpu": "Other CPU", "cpu_count": 16, "gpu": None}
    with pytest.raises(ConfigError, match="different hardware.*cpu_count: 2 there, 16 now"):
        gate(results_of(runs()), results_of(runs(), machine=other))
    report = gate(results_of(runs()), results_of(runs(), machine=other), any_machine=True)
    assert "hostname: 'box' there, 'box2' now" in report.environment_notes


def test_min_runs_matches_the_exact_mann_whitney_level():
    # With r runs a side the most extreme ranking has probability 2 / C(2r, r): 4 is the first below 5%.
    assert min_runs(0.95) == 4 and 2 / 70 < 0.05 < 2 / 20
