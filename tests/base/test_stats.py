import math

import pytest

from sbprof.base.stats import METRICS, rtf, rtfx, summarise


def test_summarise_hand_computed():
    s = summarise([4.0, 1.0, 3.0, 2.0])
    # sorted 1 2 3 4: median 2.5, q1 at position 0.75 -> 1.75, q3 at 2.25 -> 3.25
    assert (s.count, s.median, s.q1, s.q3, s.iqr) == (4, 2.5, 1.75, 3.25, 1.5)
    assert (s.min, s.max, s.mean) == (1.0, 4.0, 2.5)
    assert s.stdev == pytest.approx(math.sqrt(5 / 3))


def test_summarise_single_and_empty():
    s = summarise([0.5])
    assert (s.median, s.iqr, s.stdev) == (0.5, 0.0, 0.0)
    with pytest.raises(ValueError):
        summarise([])


def test_rtf_and_rtfx_are_inverse():
    assert rtf(2.0, 8.0) == 0.25
    assert rtfx(2.0, 8.0) == 4.0
    with pytest.raises(ValueError):
        rtf(1.0, 0.0)
    with pytest.raises(ValueError):
        rtfx(0.0, 1.0)


def test_every_metric_has_the_unit_its_name_implies():
    expected_unit = {"_s": "s", "_bytes": "GB", "rtf": "", "rtfx": ""}
    for name, metric in METRICS.items():
        assert metric.name == name and len(metric.definition) > 20
        suffix = next(k for k in expected_unit if name.endswith(k))
        assert metric.unit == expected_unit[suffix], name
    # throughput is the one figure where higher is better
    assert [n for n, m in METRICS.items() if not m.lower_is_better] == ["rtfx"]
