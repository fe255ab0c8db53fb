"""The stopping rule of adaptive repeats (:func:`sbprof.analysis.vary.imprecise`): more rounds while a ratio that
could be ranked is wider than the target, whatever its position against 1."""
from __future__ import annotations

import math

from sbprof.analysis.intervals import interval_over_runs
from sbprof.analysis.vary import (PRECISION, TOO_FEW_RUNS, Figure, VariantResult, VaryReport, half_width,
                                  imprecise)
from sbprof.analysis.verdict import compare_runs

BASE = [1.00, 1.01, 0.99, 1.00]


def _variant(name, runs, loss_ok=True):
    ratio = compare_runs([[b] for b in BASE], [[v] for v in runs], threshold=0.0, confidence=0.95)
    figure = Figure("steps_per_s", interval_over_runs(runs), ratio)
    return VariantResult(name, [], len(runs), figures={"steps_per_s": figure}, loss_ok=loss_ok)


def _report(*variants):
    return VaryReport("x.py", "train", "steps_per_s", 4, 0.02, [_variant("base", BASE), *variants])


def test_narrow_ratios_stop_whether_or_not_they_include_1():
    faster = _variant("faster", [2.00, 2.02, 1.98, 2.01])
    same = _variant("same", [1.00, 0.995, 1.01, 1.005])
    assert same.figures["steps_per_s"].no_change and not faster.figures["steps_per_s"].no_change
    assert imprecise(_report(faster, same)) == {}


def test_a_wide_ratio_asks_for_more_rounds_even_when_it_already_excludes_1():
    wide = _variant("wide", [1.3, 2.6, 1.6, 3.0])
    width = half_width(wide.figures["steps_per_s"])
    r = wide.figures["steps_per_s"].ratio
    assert r.low > 1 and math.isclose(width, math.sqrt(r.high / r.low) - 1) and width > PRECISION
    assert imprecise(_report(wide, _variant("fine", [2.0, 2.0, 2.01, 1.99]))) == {"wide": width}


def test_flagged_failed_and_uncompared_variants():
    flagged = _variant("flagged", [1.3, 2.6, 1.6, 3.0], loss_ok=False)  # never ranked: no round for it
    failed = VariantResult("failed", [], 0, failures=["round 1: exit status 1"])
    young = _variant("young", [2.0, 2.0, 2.0, 2.0])
    young.figures["steps_per_s"].ratio = None  # too few runs for an interval yet: asks for more
    young.figures["steps_per_s"].no_ratio = f"2 {TOO_FEW_RUNS}"
    assert imprecise(_report(flagged, failed, young)) == {"young": math.inf}


def test_a_ratio_more_rounds_cannot_give_asks_for_none():
    # The base never ran (or a run read zero): every round added would end the same way, up to --max-rounds.
    orphans = []
    for name, why in (("no base", "the base has no successful run"), ("zero", "a run read zero")):
        v = _variant(name, [2.0, 2.0, 2.0, 2.0])
        v.figures["steps_per_s"].ratio, v.figures["steps_per_s"].no_ratio = None, why
        orphans.append(v)
    assert imprecise(_report(*orphans)) == {}
