"""What limits a comparison (issue 33): the cheapest variant per audio second and where the growth laws cross,
each firing on constructed records built to have it and silent on records without it (hand-computed truths)."""
from __future__ import annotations

import json

import pytest

from helpers.compare_fakes import record, results_of
from sbprof.analysis.compare_models import analyse
from sbprof.analysis.limits import Limits
from sbprof.registry import get_job
from sbprof.jobs.render import summary_block
from sbprof.record.codec import from_json
from sbprof.report.compare_models import render_comparison

SIZES = (1.0, 2.0, 4.0, 8.0)


def comparison(**laws):
    """Two runs per point, three calls each at 0.99, 1 and 1.01 times the variant's law (seconds per call)."""
    records = [record(name, x, run, [law(x) * f for f in (0.99, 1.0, 1.01)])
               for name, law in laws.items() for x in SIZES for run in (0, 1)]
    return analyse(results_of(records, models=list(laws)))


def verdicts(summary, rule):
    return [v for v in summary.limits.verdicts if v.rule == rule]


def test_the_cheapest_variant_per_audio_second_is_named_with_both_costs():
    summary = comparison(small=lambda x: 0.01 * x, large=lambda x: 0.03 * x)
    v, = verdicts(summary, "cheapest")
    # At 8 s: 0.08 s and 0.24 s per call, 0.01 and 0.03 s per audio second.
    assert v.sentence == "small is the cheapest per audio second at 8 s: 3x less than large, the next."
    assert [(f.name, round(f.value, 9)) for f in v.figures] == [("small per audio second at 8 s", 0.01),
                                                                 ("large per audio second at 8 s", 0.03)]
    assert v.weight == pytest.approx(2 / 3)
    # Their intervals: the quartiles of the calls (0.99 to 1.01 times the law), per audio second.
    assert all(f.unit == "s" and 0.99 * f.value <= f.low < f.value < f.high <= 1.01 * f.value for f in v.figures)
    assert not verdicts(summary, "crossover")  # proportional laws never cross


def test_variants_whose_quartiles_overlap_are_not_ranked():
    summary = comparison(a=lambda x: 0.0100 * x, b=lambda x: 0.0101 * x)  # 1 % apart, calls +-1 %
    assert not verdicts(summary, "cheapest")
    assert summary.limits.undecided == [
        "cheapest variant: at 8 s the quartiles of a and b overlap (0.01 and 0.0101 s per audio second)"]


def test_where_the_growth_laws_cross_is_a_verdict():
    # 0.02 x = 0.005 x^2 at x = 4 s: the quadratic variant is faster below, the linear one above.
    summary = comparison(lin=lambda x: 0.02 * x, quad=lambda x: 0.005 * x * x)
    v, = verdicts(summary, "crossover")
    assert v.sentence == "quad is faster below 4 s and lin above: their growth laws cross there."
    assert v.figures[0].name == "crossing" and v.figures[0].value == pytest.approx(4.0, rel=0.02)
    assert v.figures[0].unit == "s"


def test_a_crossing_of_laws_that_miss_their_points_is_not_decided():
    wobble = {1.0: 1.0, 2.0: 0.6, 4.0: 1.8, 8.0: 1.0}  # the quadratic variant's points scatter by up to 80 %
    summary = comparison(lin=lambda x: 0.02 * x, quad=lambda x: 0.005 * x * x * wobble[x])
    assert summary.settings[0].crossovers, "the laws still cross"
    assert not verdicts(summary, "crossover")
    why, = [u for u in summary.limits.undecided if u.startswith("crossing of lin and quad")]
    assert "the laws miss their left-out points" in why and "over 20 %" in why


def test_the_verdicts_survive_results_json_and_end_the_report():
    summary = comparison(small=lambda x: 0.01 * x, large=lambda x: 0.03 * x)
    results = results_of([record(name, x, run, [law(x)] * 3) for name, law in (("small", lambda x: 0.01 * x),
                                                                                ("large", lambda x: 0.03 * x))
                          for x in SIZES for run in (0, 1)], models=["small", "large"])
    saved = json.loads(json.dumps(summary_block(get_job("compare-models"), analyse(results))))  # as results.json holds it
    assert from_json(Limits, saved["limits"]) == analyse(results).limits
    assert [v.rule for v in analyse(results).limits.verdicts] == ["cheapest"]
    report = render_comparison(summary)
    assert report.rstrip().split("\n## ")[-1].startswith("What limits this\n\n1. **cheapest.** small is the cheapest")
