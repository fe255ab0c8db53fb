"""The stream job against ground truth: a fake model whose every chunk costs a known time, measured through the
real job (command line, runner, worker process, real-time pacing, analysis, reports).

Timing ground truths are written so that other work on the machine cannot fail them: a spin on the wall clock
cannot end early (a lower bound that holds under any load), and what load adds above it is the time the serving
thread spent off a core during the call (the call's wall time minus the thread's CPU time, ``thread_cpu_s``: a
spinning thread off its core is waiting for one) or waking up late (a chunk started after it was ready), both
recorded per chunk: the figure minus those must read the known cost."""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from helpers.fake_interfaces import use_test_environment
from helpers.fake_streaming import write_fake_model
from helpers.stream_configs import write_stream_yaml
from sbprof.analysis.stream import analyse
from sbprof.analysis.stream_criterion import BEHIND_SLOPE, delay_slope
from sbprof.cli import main
from sbprof.results import RESULTS_FILE, load_results

CLOCK = 1e-4  # a spin reads the same clock as the job: it ends at or after its deadline, within this


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")


def _run(tmp_path: Path, capsys, **keys) -> Path:
    out = tmp_path / "out"
    path = write_stream_yaml(tmp_path / "s.yaml", keys.pop("source"), output_folder=out, **keys)
    assert main(["stream", str(path), "--noprogressbar"]) == 0, capsys.readouterr().err
    return out


def _records(out: Path):
    return json.loads((out / RESULTS_FILE).read_text())["records"]


def late_s(chunks, i: int, previous_end: float) -> float:
    """How late chunk ``i`` started after it was ready (arrived, and the server free): waking up under load."""
    return max(0.0, chunks["start_s"][i] - max(chunks["arrival_s"][i], previous_end))


def off_core_s(chunks, i: int) -> float:
    """How long the serving thread was off a core during chunk ``i``'s call: its wall time minus the thread's CPU
    time (for a fake that spins, time spent waiting for a core)."""
    return chunks["end_s"][i] - chunks["start_s"][i] - chunks["thread_cpu_s"][i]


def core_was_free(probes, cost_s: float) -> bool:
    """Whether the worker had its core: its thread was off it less than 10 % of the known cost per chunk (median
    over each probe's chunks). On a machine whose cores are taken by other work, fewer streams fit, truly: a
    capacity read there is a lower one, and only that is asserted."""
    waits = [statistics.median(off_core_s(p, i) for i in range(len(p["stream"]))) for p in probes if p["stream"]]
    return all(w < 0.1 * cost_s for w in waits)


def load_added_s(chunks, i: int, previous_end: float) -> float:
    """What other work on the machine added to chunk ``i``'s delay: a late start and waiting for a core."""
    return late_s(chunks, i, previous_end) + off_core_s(chunks, i)


@pytest.fixture(scope="module")
def known_cost(tmp_path_factory):
    """The fake at 80 ms per 200 ms chunk (40 % of real time), no flush chunk, 1 kB... of state (1000 float32):
    one latency cell of one stream and the capacity search."""
    tmp = tmp_path_factory.mktemp("known")
    out = tmp / "out"
    model = write_fake_model(tmp / "fake", compute_s=0.080, frame_samples=400, final_chunks=0, state_floats=1000)
    path = write_stream_yaml(tmp / "s.yaml", str(model), audio_s=1.6, output_folder=out,
                             capacity={"chunk_size": 8, "left_context_chunks": 2, "max_streams": 8})
    with pytest.MonkeyPatch.context() as monkeypatch:  # module scope: set up before the autouse fixture
        use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")
        assert main(["stream", str(path), "--noprogressbar"]) == 0
    return out, analyse(load_results(out))


def test_a_known_chunk_cost_reads_within_3_percent_once_the_wait_for_a_core_is_taken_out(known_cost):
    out, summary = known_cost
    (row,) = summary.settings[0].rows
    assert row.chunk_ms == pytest.approx(200.0)
    assert row.chunks == 8  # eight 200 ms chunks of the 1.6 s utterance (this fake needs no flush chunk)
    record = next(r for r in _records(out) if r["cell"]["params"]["kind"] == "latency")
    chunks = record["extra"]["chunks"]
    compute = [e - s for s, e in zip(chunks["start_s"], chunks["end_s"])]
    assert record["wall_s"] == pytest.approx(compute)
    # A spin cannot end early: every chunk at least the known 80 ms, whatever the load.
    assert min(compute) >= 0.080 - CLOCK
    # Above it, only what load added: the thread's time off a core during the call. Without it, 80 ms within 3 %
    # (a wrong clock, or anything else inside it, would show here).
    assert statistics.median(c - off_core_s(chunks, i) for i, c in enumerate(compute)) <= 0.080 * 1.03
    assert row.compute_ms["p50"] == pytest.approx(1e3 * statistics.median(compute))
    assert row.margin == pytest.approx(200.0 / row.compute_ms["p99"])  # the worst-case compute budget
    assert row.tokens_per_chunk == 1.0 and row.tokens_per_audio_s == pytest.approx(8 / 1.6)
    assert row.streaming_rtf == pytest.approx(sum(compute) / 1.6)


def test_state_per_stream_is_exactly_the_bytes_of_the_context_tensors(known_cost):
    _, summary = known_cost
    s = summary.settings[0]
    assert s.rows[0].state_kb == 4.0  # 1000 float32 values
    assert s.capacity.state_kb == 4.0
    assert s.capacity.marginal_mb is not None  # the slope of process memory over the probes' stream counts


def test_capacity_at_40_percent_of_real_time_is_the_hand_computed_2_streams_with_a_delay_of_one_compute(known_cost):
    out, summary = known_cost
    cap = summary.settings[0].capacity
    # By hand: one server, chunks of N streams evenly interleaved (stream i at i/N of a chunk), each 80 ms.
    # N x 80 ms <= 200 ms for N <= 2: each chunk finds the server idle, its delay is one compute (80 ms).
    # N = 3: 240 ms of work per 200 ms: the backlog grows by 40 ms a period, the delay by 0.2 s per s.
    # Load can only lower the capacity (a spin cannot end early: 3 streams never fit); it is the hand-computed 2
    # whenever the worker had its core (it waited for one less than 10 % of the time: see ``core_was_free``).
    assert cap.target_ms == pytest.approx(200.0)  # the default target: one chunk duration
    probes = {p["streams"]: p["chunks"] for p in reversed(next(
        r for r in _records(out) if r["cell"]["params"]["kind"] == "capacity")["extra"]["probes"])}  # each first
    assert cap.capacity <= 2 == math.floor(200 / 80)
    assert not any(p.passed for p in cap.probes if p.streams >= 3)
    if core_was_free(probes.values(), 0.080):
        assert cap.capacity == 2 and (cap.capacity_low, cap.capacity_high) == (2, 2)
        # The bisection (1, 2, 3), then the boundary, 2 and 3, probed again until each has 3 probes: all agree.
        assert [p.streams for p in cap.probes] == [1, 2, 3, 2, 3, 2, 3]
        assert [(p.streams, p.passed) for p in cap.probes][:3] == [(1, True), (2, True), (3, False)]
        assert all(p.passed == (p.streams == 2) for p in cap.probes[1:])
    two = probes.get(2, probes[1])
    previous = 0.0
    for i in range(len(two["stream"])):
        delay = two["end_s"][i] - two["arrival_s"][i]
        assert delay >= 0.080 - CLOCK  # never less than one compute
        assert delay - load_added_s(two, i, previous) <= 0.080 * 1.03 + 0.002  # and one compute, but for load
        previous = two["end_s"][i]
    three = probes.get(3) or probes[max(probes)]
    slope = delay_slope(three["arrival_s"], [e - a for e, a in zip(three["end_s"], three["arrival_s"])])
    assert slope >= 0.2 * 0.8 and slope > BEHIND_SLOPE  # load only makes chunks longer: the slope only steeper
    # The worst-case budget: floor(200 ms / the p99 compute at the capacity). By hand floor(200 / 80) = 2; a chunk
    # preempted at its deadline raises the p99, so load can only lower it: never above the capacity.
    assert cap.budget == math.floor(200.0 / cap.p99_compute_ms) <= cap.capacity
    assert cap.budget_low <= cap.budget <= cap.budget_high
    report = (out / "report.md").read_text()
    line = next(line for line in report.splitlines() if line.startswith("| cpu, 1 thread"))
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert cells[:4] == ["cpu, 1 thread", "8 (200 ms)", "2", "200"]
    assert cells[4] == f"{cap.capacity:g} [{cap.capacity_low:g}, {cap.capacity_high:g}]"
    for name in ("stream-cdf-cpu-1threads.png", "stream-streams-cpu-1threads.png", "stream-tradeoff-cpu-1threads.png"):
        assert (out / "plots" / name).is_file()


def test_phase_spread_streams_have_no_end_burst_where_aligned_ones_do(tmp_path, capsys):
    """4 streams of 8 chunks of 400 ms at 60 ms a chunk, a flush chunk each: the delay of the chunk holding a
    session's last sample (end of utterance) against the other chunks' (steady)."""
    model = write_fake_model(tmp_path / "fake", compute_s=0.060, frame_samples=800)
    rows = {}
    for traffic in ("spread", "aligned"):
        out = _run(tmp_path / traffic, capsys, source=str(model), audio_s=3.2, streams=[4], traffic=traffic)
        (rows[traffic],) = analyse(load_results(out)).settings[0].rows
    spread, aligned = rows["spread"], rows["aligned"]
    assert spread.end_delay_ms["p99"] <= 1.2 * spread.delay_ms["p99"]  # no end burst: within 20 % of steady
    assert spread.end_delay_ms["p99"] >= 60 - 0.1
    # The same streams all ending in one chunk period: each last chunk queues behind the others' flushes (by hand,
    # 60, 80, 100, 120 ms for the four), twice the steady 60 ms.
    assert aligned.end_delay_ms["p99"] >= 1.5 * aligned.delay_ms["p50"]


def test_emission_latency_of_a_token_emitted_d_after_its_reference_end_reads_d(tmp_path, capsys):
    """The fake emits one token per chunk, 20 ms of compute after the chunk arrives; the reference says unit k
    ended d = 50 ms before that. Each token's emission latency is d plus what load added to its chunk, never
    less; so p50 and p99 read d within the load's own recorded share."""
    d, cost, chunk = 0.050, 0.020, 0.200
    ends = [round((k + 1) * chunk + cost - d, 6) for k in range(8)]
    model = write_fake_model(tmp_path / "fake", compute_s=cost, frame_samples=400, final_chunks=0)
    out = _run(tmp_path, capsys, source=str(model), audio_s=1.6, alignment=ends)
    (row,) = analyse(load_results(out)).settings[0].rows
    chunks = _records(out)[0]["extra"]["chunks"]
    added = [0.0] * 8
    previous = 0.0
    for i in range(8):
        compute = chunks["end_s"][i] - chunks["start_s"][i]
        added[chunks["index"][i]] = late_s(chunks, i, previous) + compute - cost
        previous = chunks["end_s"][i]
    assert row.emission_tokens == 8
    assert min(added) >= -CLOCK
    assert d * 1e3 - 0.1 <= row.emission_ms["p50"] <= (d + statistics.median(added)) * 1e3 + 0.1
    assert row.emission_ms["p99"] <= (d + max(added)) * 1e3 + 0.1


def test_under_pacing_a_chunk_slower_than_real_time_queues_and_the_delay_grows_as_computed_by_hand(tmp_path, capsys):
    compute, chunk = 0.060, 0.040  # 60 ms per 40 ms chunk (4 frames of 160 samples)
    out = _run(tmp_path, capsys, source=str(write_fake_model(tmp_path / "slow", compute_s=compute)),
               chunk_sizes=[4], audio_s=0.4)
    record = _records(out)[0]
    chunks = record["extra"]["chunks"]
    assert chunks["samples"] == [640] * 10 + [0]  # ten chunks, then the flush chunk
    # By hand: chunk k (k = 0..9) is complete at (k + 1) x 40 ms, the flush chunk with the last sample (400 ms).
    # The server waits for chunk 0 only, then is always behind: chunk k is out at 40 ms + (k + 1) x 60 ms.
    arrival = [(k + 1) * chunk for k in range(10)] + [10 * chunk]
    assert chunks["arrival_s"] == pytest.approx(arrival)
    start, end = chunks["start_s"], chunks["end_s"]
    # The queue: a chunk starts when it has arrived and the one before it is out (one server, in order): never
    # before, and typically within 5 ms (waking up from a sleep; a preempted wake-up on a shared machine is later).
    ready = [max(a, e) for a, e in zip(arrival, [0.0] + end[:-1])]
    assert all(st >= r - 1e-4 for st, r in zip(start, ready)), (start, ready)
    assert statistics.median(st - r for st, r in zip(start, ready)) <= 0.005
    # So, by hand: chunk 0 waits for nothing (its delay is one compute), and from then on each chunk waits for the
    # last: the delay grows by compute - chunk duration = 20 ms per chunk. A spin never ends early, so neither
    # figure reads less; what load adds (a late start, a wait for a core) is recorded per chunk and taken out.
    delays = [e - a for e, a in zip(end, arrival)]
    added = [load_added_s(chunks, i, ([0.0] + end)[i]) for i in range(11)]
    assert compute - 0.001 <= delays[0] and delays[0] - added[0] <= compute * 1.03 + 0.002
    steps = [b - a for a, b in zip(delays[:10], delays[1:10])]
    assert statistics.median(steps) >= compute - chunk - 0.001
    assert statistics.median(s - w for s, w in zip(steps, added[1:10])) <= (compute - chunk) + 0.03 * compute
    assert delays[9] > delays[0] + 8 * (compute - chunk)  # linear over the utterance, not a one-off jump
    row = analyse(load_results(out)).settings[0].rows[0]
    assert row.behind and row.delay_growth > BEHIND_SLOPE  # the backlog grows: behind
    assert row.final_ms == pytest.approx(1000 * delays[-1])


@pytest.mark.parametrize("edit, message", [
    ({"chunk_sizes": [0]}, "streaming.chunk_sizes must hold only positive integers, got 0 in [0]"),
    ({"left_context_chunks": [-2]}, "streaming.left_context_chunks must hold integers >= 0 (past chunks) or -1"),
    ({"streams": [0]}, "streaming.streams must hold only positive integers, got 0"),
    ({"type_name": "EncoderASR"}, "(EncoderASR) cannot stream: it has no make_streaming_context"),
])
def test_bad_input_is_one_line_and_exit_code_2_before_any_worker(tmp_path, capsys, edit, message):
    path = write_stream_yaml(tmp_path / "s.yaml", str(write_fake_model(tmp_path / "fake", 0.01)), **edit)
    assert main(["stream", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("sbprof: error: ") and message in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("model, edit, message", [
    # The real StreamingASR class on a folder whose hyperparameters cannot stream.
    ({}, {"type_name": "StreamingASR"},
     "model '{folder}' has no streaming hyperparameters (ValueError: Need hparams['fea_streaming_extractor'])"),
    # A model trained with bounded left contexts only (limited_left_context_prob 1): -1 is refused.
    ({"trained": "chunkwise_prob: 1.0, chunk_size_min: 8, chunk_size_max: 32, limited_left_context_prob: 1.0, "
                 "left_context_chunks_min: 2, left_context_chunks_max: 16"}, {"left_context_chunks": [2, -1]},
     "streaming.left_context_chunks: -1 is not allowed by model '{folder}': it was trained for chunk sizes 8 to 32 "
     "frames, left contexts 2 to 16 chunks"),
])
def test_what_only_the_loaded_model_can_tell_is_bad_input_too(tmp_path, capsys, model, edit, message):
    folder = write_fake_model(tmp_path / "fake", 0.01, **model)
    path = write_stream_yaml(tmp_path / "s.yaml", str(folder), **edit)
    assert main(["stream", str(path), "--noprogressbar"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message.format(folder=folder) in err
    assert not (tmp_path / "out").exists()  # the folder this run made, holding no result, is gone
