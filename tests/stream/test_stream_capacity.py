"""Streams per machine, the worst-case compute budget and memory per added stream against ground truth (issue 44).

The ground truth is a fake ``StreamingASR`` whose every chunk costs a known time (a spin on the wall clock: it
cannot end early, and load does not lengthen it unless the thread is off its core at its deadline), served by the
real job, beside a single-queue server simulated here from the description in ``docs/stream.md`` alone (spread
traffic: stream i at i/n of a chunk, floor(i M / n) chunks into its utterance, a fresh utterance right after each;
one server, first come first served; the capacity criterion: p99 delay within the target and a delay growth of at
most 0.05 s per s). What load can change is said where it is asserted: a busier machine truly serves fewer
streams, so a capacity read there is only held below the simulation's, and to it when the server's thread waited
for a core less than 1 % of the probes at the boundary.
"""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from helpers.fake_interfaces import use_test_environment
from helpers.fake_streaming import write_fake_model
from helpers.queue_simulation import arrivals, simulated_capacity
from helpers.stream_configs import write_stream_yaml
from sbprof.analysis.stream import analyse
from sbprof.cli import main
from sbprof.results import RESULTS_FILE, load_results

QUIET = 0.01  # the share of a probe the server's thread may have waited for a core for the machine to count as quiet


def run(tmp: Path, model: Path, audio_s: float, capacity) -> tuple:
    out = tmp / "out"
    path = write_stream_yaml(tmp / "s.yaml", str(model), audio_s=audio_s, output_folder=out, capacity=capacity)
    assert main(["stream", str(path), "--noprogressbar"]) == 0
    record = next(r for r in json.loads((out / RESULTS_FILE).read_text())["records"]
                  if r["cell"]["params"]["kind"] == "capacity")
    return out, analyse(load_results(out)).settings[0].capacity, record


def quiet(cap) -> bool:
    """Whether the server's thread had its core at the boundary (each probe of the capacity and the next count)."""
    near = [p for p in cap.probes if p.streams in (cap.capacity, cap.capacity + 1)]
    return all(p.waited_share is not None and p.waited_share < QUIET for p in near)


# -- a cheap model: 2 ms per 100 ms chunk, where 0.1 ms of bookkeeping a chunk costs the server 2 to 3 streams ------

COST, CHUNK, CHUNKS = 0.002, 0.100, 10
STATE_FLOATS = 65536  # addressed: 256 KiB a stream; held: the 512 KiB buffer it is sliced from


@pytest.fixture(scope="module")
def cheap(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cheap")
    model = write_fake_model(tmp / "fake", compute_s=COST, frame_samples=200, final_chunks=0,
                             state_floats=STATE_FLOATS, state_view=True)
    with pytest.MonkeyPatch.context() as monkeypatch:  # module scope: set up before any function fixture
        use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")
        # Every state buffer its own mapping, returned when freed: glibc's default would serve one from a freed
        # buffer the server's small objects were carved out of, and grow the heap by a quarter more than the
        # state (0.66 against 0.52 MB a stream, seen here): allocator growth, which the figure includes by
        # definition but this ground truth leaves out.
        monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", str(128 * 1024))
        return run(tmp, model, CHUNKS * CHUNK, {"chunk_size": 8, "left_context_chunks": 2, "max_streams": 64,
                                                "boundary_probes": 2})


def test_a_cheap_models_streams_per_machine_is_an_exact_simulations_within_one_stream(cheap):
    out, cap, record = cheap
    simulated = simulated_capacity(64, CHUNKS, CHUNK, lambda k: COST)
    assert 48 <= simulated <= 56  # 100 ms / 2 ms = 50 streams, and up to 5 % more before the delay grows too fast
    # The same arrivals: every probe's chunks arrived when the simulation has them arrive (those a probe that fell
    # 2 s behind left unserved counted).
    for probe in record["extra"]["probes"]:
        recorded = probe["chunks"]["arrival_s"]  # in the order served: the order of arrival
        expected = [a for a, _, _, _ in arrivals(probe["streams"], CHUNKS, CHUNK)]
        assert len(recorded) + probe["unserved_chunks"] == len(expected)
        assert recorded == pytest.approx(expected[:len(recorded)], abs=1e-9)
    # Load only lowers it (a spin never ends early, a busy machine serves fewer); on a quiet machine, within one.
    assert cap.capacity <= simulated + 1 and cap.capacity_high <= simulated + 1, (simulated, cap.probes)
    assert cap.capacity_low <= cap.capacity <= cap.capacity_high
    if quiet(cap):
        assert abs(cap.capacity - simulated) <= 1, (simulated, cap.probes)
    # The counts at the boundary were probed again: twice each, the capacity and the next count.
    counts = [p.streams for p in cap.probes]
    assert counts.count(int(cap.capacity)) >= 2 and counts.count(int(cap.capacity) + 1) >= 2, counts
    report = (out / "report.md").read_text()
    assert f"{cap.capacity:g} [{cap.capacity_low:g}, {cap.capacity_high:g}]" in report
    assert "how far the boundary moved between repeated" in report  # the range's definition under the table


def test_the_servers_own_time_per_chunk_is_measured_and_bounded(cheap):
    _, cap, record = cheap
    gaps = []  # from one call's end to the next one's start, where the next chunk was already waiting
    for probe in record["extra"]["probes"]:
        c = probe["chunks"]
        gaps += [c["start_s"][i] - c["end_s"][i - 1] for i in range(1, len(c["start_s"]))
                 if c["arrival_s"][i] <= c["end_s"][i - 1]]
    # Enough back-to-back calls for a median (over 1,000 on a quiet machine; 359 seen in the full suite at load 7,
    # where a probe that falls behind stops early)
    assert min(gaps) >= 0 and len(gaps) > 100
    assert cap.own_us == pytest.approx(statistics.median(gaps) * 1e6)
    # Two clock reads and a row a chunk: about 20 µs here (median, load 9 on 2 cores), where reading /proc files
    # after each call took 200 µs (benchmarks/stream_overhead.py). The median holds under load: a preemption lands
    # in a few gaps only.
    assert cap.own_us <= 60, cap.own_us


def test_memory_per_added_stream_reads_the_state_a_fake_holds_per_stream(cheap):
    out, cap, _ = cheap
    held, addressed = 8 * STATE_FLOATS, 4 * STATE_FLOATS
    assert (cap.state_kb, cap.state_view_kb) == (held / 1e3, addressed / 1e3)  # exact: the bytes of the tensors
    value, low, high = cap.marginal_mb
    # What each probe added to the process's memory grows by the buffer each live stream holds, whole (a slice keeps
    # its buffer), plus a few kB of the server's own rows and chunks per stream; within 10 %: a probe that falls
    # far behind has a stream or two fewer live at once (0.50 to 0.53 MB seen here at loads 8 to 12).
    assert held / 1e6 * 0.9 <= value <= held / 1e6 * 1.1, cap.marginal_mb
    assert low <= value <= high and low > addressed / 1e6
    assert len({p.streams for p in cap.probes}) >= 3
    report = (out / "report.md").read_text()
    assert f"{held / 1e3:.0f} ({addressed / 1e3:.0f})" in report  # held (addressed), kB


# -- a spread of costs: the capacity against the simulation, and the budget of two searches ---------------------

PATTERN = [0.4, 1.6, 1.0, 0.6, 1.9, 0.5]  # per-call multipliers of 40 ms (mean 40 ms, p99 76 ms) per 200 ms chunk


@pytest.fixture(scope="module")
def spread(tmp_path_factory):
    """The same fake, two searches: up to 8 streams (it bisects past the capacity) and up to 3 (it stops there)."""
    tmp = tmp_path_factory.mktemp("spread")
    model = write_fake_model(tmp / "fake", compute_s=0.040, frame_samples=400, final_chunks=0, pattern=PATTERN)
    with pytest.MonkeyPatch.context() as monkeypatch:
        use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")
        return [run(tmp / str(n), model, 1.2, {"chunk_size": 8, "left_context_chunks": 2, "max_streams": n,
                                               "boundary_probes": 2}) for n in (8, 3)]


def test_with_a_spread_of_costs_the_capacity_is_the_simulations_within_one_stream(spread):
    _, cap, _ = spread[0]
    simulated = simulated_capacity(8, 6, 0.2, lambda k: 0.040 * PATTERN[k % len(PATTERN)])
    assert 3 <= simulated <= 5  # not degenerate: the spread matters between 1 and the search's limit
    assert cap.capacity <= simulated + 1, (cap.capacity, simulated, cap.probes)
    if quiet(cap):
        assert abs(cap.capacity - simulated) <= 1, (cap.capacity, simulated, cap.probes)


def test_the_worst_case_budget_is_the_same_for_two_searches_that_probe_different_counts(spread):
    (_, wide, _), (_, narrow, _) = spread
    assert {p.streams for p in wide.probes} != {p.streams for p in narrow.probes}
    for cap in (wide, narrow):  # its definition: floor(chunk duration / the p99 chunk compute at the capacity)
        assert cap.budget == math.floor(200 / cap.p99_compute_ms) and cap.budget_low <= cap.budget <= cap.budget_high
        # By hand: the p99 is the pattern's dearest call, 76 ms: floor(200 / 76) = 2. A call off its core at its
        # deadline ends late; under 24 ms late, the budget stays 2.
        assert cap.p99_compute_ms >= 76 - 0.1
    if max(wide.p99_compute_ms, narrow.p99_compute_ms) < 100:
        assert wide.budget == narrow.budget == 2
