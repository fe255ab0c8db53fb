"""The GPU check's comparisons (benchmarks/gpu_truths.py) on recorded numbers: each holds on what a right figure
reads and fails on what a known wrong one read (first contact with an H200: GPU busy time counted the mirrored
record_function ranges, 6.9 ms of it in a 5.8 ms wall)."""
from __future__ import annotations

import doctest
import json

import pytest

import benchmarks.gpu_truths as truths
from benchmarks.gpu_truths import (FIGURES_ENV, Figure, allocator_bytes, as_json, check, exact, largest_fitting,
                                   markdown, medians, queue_delays, read_figures, relative, share_of_peak,
                                   simulated_streams, sum_and_top, trapezoid_joules, within_count)


def test_the_modules_examples_hold():
    assert doctest.testmod(truths).failed == 0


def test_a_step_clock_enclosing_the_events_holds_and_one_inside_them_does_not():
    events = [20.01e-3, 20.03e-3, 19.98e-3, 20.02e-3]
    assert medians("step", [e + 60e-6 for e in events], events, 0.02, "s", one_sided=True).holds
    assert not medians("step", [e - 1e-3 for e in events], events, 0.02, "s", one_sided=True).holds  # reads less
    assert not medians("step", [e * 1.03 for e in events], events, 0.02, "s", one_sided=True).holds
    assert not medians("step", [], events, 0.02).holds


def test_gpu_busy_time_counting_the_mirrored_ranges_fails_its_truth():
    assert not relative("GPU busy", 6.9e-3, 5.8e-3, 0.05, "s").holds
    assert relative("GPU busy", 5.75e-3, 5.8e-3, 0.05, "s").holds


def test_allocator_rounding_of_many_small_tensors_and_one_large():
    sizes = [1000] * 300 + [4096] * 200 + [256 * 2 ** 20]
    expected = 300 * 1024 + 200 * 4096 + 256 * 2 ** 20
    assert allocator_bytes(sizes) == expected
    assert exact("peak", expected, expected).holds and not exact("peak", expected - 512, expected).holds
    assert exact("peak", expected + 512, expected).agreement == "off by +512 B"


def test_per_module_time_needs_the_sum_and_the_same_top():
    ours = {"enc": 8.1, "dec": 3.0, "head": 0.5}
    assert sum_and_top("modules", ours, {"enc": 8.0, "dec": 3.1, "head": 0.5}, 0.05).holds
    assert not sum_and_top("modules", ours, {"enc": 3.0, "dec": 8.0, "head": 0.6}, 0.05).holds  # another top
    assert not sum_and_top("modules", ours, {"enc": 6.0, "dec": 2.0, "head": 0.5}, 0.05).holds  # sum 37 % over


@pytest.mark.parametrize("peak,precision,holds", [
    (989.5e12, "bf16", True),   # H200 bf16 work against the bf16 peak: 70 %
    (67e12, "fp32", False),     # the same work against the fp32 peak: 1,000 %, a wrong peak
    (494.5e12, "tf32", False),  # right share range but another precision's peak
])
def test_share_of_peak_needs_the_peak_of_the_works_precision(peak, precision, holds):
    assert share_of_peak("mm", 690e12, 700e12, peak, precision, "bf16", 0.05).holds is holds


def test_energy_integrated_from_power_readings():
    times = [i * 0.01 for i in range(301)]  # 3 s sampled every 10 ms
    watts = [100.0 if t < 1 or t >= 2 else 500.0 for t in times]  # one busy second at 500 W
    assert trapezoid_joules(times, watts) == pytest.approx(100 * 3 + 400 * 1, rel=0.01)
    assert relative("energy", 702.0, trapezoid_joules(times, watts), 0.15, "J").holds


def test_the_simulated_queue_gives_the_hand_computed_capacity():
    # 80 ms a chunk per 200 ms: 2 streams fit (160 ms), 3 do not (240 ms a period: the queue grows)
    assert simulated_streams([0.080], 0.2, 0.2, 8) == 2
    assert max(queue_delays([0.080], 2, 0.2)) == pytest.approx(0.080)
    # a spread of costs around a mean of 100 ms per 500 ms chunk
    spread = [0.04, 0.16, 0.10, 0.06, 0.19, 0.05]
    assert 3 <= simulated_streams(spread, 0.5, 0.5, 8) <= 5
    assert within_count("streams", 4, simulated_streams([0.14], 0.5, 0.5, 8)).holds
    assert not within_count("streams", 6, 3).holds


def test_the_largest_fitting_cell_of_a_known_allocation():
    grid = [(s, b) for s in (1, 2, 4, 8) for b in (1, 2)]
    assert largest_fitting(grid, 0.5, 3.0) == (4, 1)  # 2 GB; (2, 2) holds as much audio, but shorter
    assert largest_fitting(grid, 0.5, 8.5) == (8, 2)
    assert largest_fitting([(8, 1), (16, 1)], 0.5, 3.0) is None


def test_check_records_each_figure_as_a_json_line_and_fails_with_its_row(tmp_path, monkeypatch):
    path = tmp_path / "figures.jsonl"
    monkeypatch.setenv(FIGURES_ENV, str(path))
    check(relative("step time", 1.0, 1.0, 0.02, "s"))
    with pytest.raises(AssertionError, match=r"step time \| 1.1 s \| 1 s \| \+10.0 % \(tolerance ±2 %\) \| NO"):
        check(relative("step time", 1.1, 1.0, 0.02, "s"))
    figures = read_figures(str(path))
    assert [f.holds for f in figures] == [True, False]
    assert figures[0].source.endswith("test_check_records_each_figure_as_a_json_line_and_fails_with_its_row")


def test_the_table_in_markdown_and_json():
    figures = [relative("a", 1.0, 1.0, 0.01), Figure("b", "-", "-", "skipped", None, note="needs 2 GPUs")]
    versions = {"GPU": "NVIDIA H200", "torch": "2.11.0"}
    text = markdown(figures, versions)
    assert "| figure | sbprof | outside reference | agreement | holds? |" in text
    assert "| b | - | - | skipped (needs 2 GPUs) | n/a |" in text and "1 held, 0 did not, 1 not compared" in text
    data = json.loads(json.dumps(as_json(figures, versions)))
    assert data["versions"]["GPU"] == "NVIDIA H200" and data["figures"][1]["note"] == "needs 2 GPUs"
