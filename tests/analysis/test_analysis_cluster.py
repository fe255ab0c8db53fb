"""A cluster's machine types: the between-node floor on records with known node offsets, the outlying node named,
and the cost of 1,000 hours of audio exact against a hand computation from the records."""
from __future__ import annotations

import math
import random
import statistics

import pytest

from sbprof.analysis.cluster import Price, analyse_cluster, cost_rows, type_nodes
from sbprof.analysis.intervals import typical_interval
from sbprof.record import Cell, Env, Measurement
from sbprof.record.results import Results

OFFSETS = {"n1": 1.00, "n2": 1.04, "n3": 0.97, "n4": 1.00}
"""Each node's known speed factor against the others (n2 4 % slower, n3 3 % faster)."""


def records(offsets, cells=6, jitter=0.002, seed=3):
    """``cells`` cells of known base times, each run on every node in turn, times x the node's factor x a small
    within-node jitter."""
    rng = random.Random(seed)
    out = []
    for c in range(cells):
        base = 0.01 * (c + 1)
        for run, (node, factor) in enumerate(sorted(offsets.items()) * 2):
            t = base * factor * math.exp(rng.uniform(-jitter, jitter))
            out.append(Measurement(label=f"c{c}", cell=Cell(model="m", audio_s=float(c + 1), batch_size=1, run=run),
                                   wall_s=[t, t, t], extra={"cluster": {"node": node, "type": "cpu"}}))
    return out


def test_the_between_node_floor_is_the_spread_of_known_node_offsets():
    nodes = type_nodes("cpu", records(OFFSETS))
    truth = statistics.stdev(math.log(f) for f in OFFSETS.values())
    assert nodes.floor == pytest.approx(truth, abs=0.003)
    centre = statistics.median(OFFSETS.values())
    for n in nodes.nodes:
        assert n.relative == pytest.approx(OFFSETS[n.node] / centre - 1, abs=0.004) and not n.outlier
    assert {n.records for n in nodes.nodes} == {12}  # 6 cells x 2 runs per node, pooled across runs


def test_a_node_whose_cells_are_slow_is_named_and_left_out_of_the_floor():
    nodes = type_nodes("cpu", records({**OFFSETS, "n5": 1.40}))
    assert nodes.outliers == ["n5"]
    assert nodes.floor == pytest.approx(statistics.stdev(math.log(f) for f in OFFSETS.values()), abs=0.006)
    assert type_nodes("cpu", records({"n1": 1.0, "n2": 1.5})).outliers == []  # two nodes cannot tell which is off


def test_the_cost_of_1000_hours_is_exact_against_a_hand_computation():
    walls = [[0.30, 0.32, 0.31], [0.33, 0.35, 0.34], [0.29, 0.30, 0.31], [0.40, 0.30, 0.35]]
    cpus = [[0.28, 0.30, 0.29], [0.31, 0.33, 0.32], [0.27, 0.28, 0.29], [0.30, 0.29, 0.31]]
    env = Env(cpu="Xeon", cpu_count=8)
    recs = [Measurement(label="c", cell=Cell(model="m", audio_s=2.0, batch_size=2, run=r), wall_s=w, cpu_s=c,
                        audio_seconds=4.0, env=env) for r, (w, c) in enumerate(zip(walls, cpus))]
    row, = cost_rows("cpu8", Results("profile", records=recs), Price(per_hour=1.6))
    rtf_runs = [statistics.median(x / 4.0 for x in w) for w in walls]  # each run's median batch RTF
    by_hand = typical_interval(rtf_runs)
    assert row.rtf.median == pytest.approx(statistics.median(rtf_runs), rel=1e-12)
    assert (row.cost.median, row.cost.low, row.cost.high) == pytest.approx(
        (by_hand.median * 1600, by_hand.low * 1600, by_hand.high * 1600), rel=1e-12)
    core_runs = [statistics.median(x / 4.0 for x in c) for c in cpus]  # core-seconds per audio second
    assert row.cpu_cost.median == pytest.approx(statistics.median(core_runs) * (1.6 / 8) * 1000, rel=1e-12)
    assert row.core_price == "its price per hour / 8 logical cores" and row.realtime


def test_the_cheapest_is_the_lowest_cost_that_stays_real_time_and_types_are_never_pooled():
    def results(wall):
        return Results("profile", records=[
            Measurement(label="c", cell=Cell(model="m", audio_s=1.0, batch_size=1, run=r), wall_s=[wall * (1 + d)],
                        audio_seconds=1.0) for r, d in enumerate((0.0, 0.01, -0.01))])

    types = [("fast", "f", results(0.1)), ("slow", "s", results(2.0)), ("mid", "m", results(0.5))]
    summary = analyse_cluster("profile", types, {"fast": Price(10.0), "slow": Price(0.1), "mid": Price(1.0)}, "EUR")
    costs = {r.machine: r.cost.median for r in summary.costs}
    assert costs == pytest.approx({"fast": 1000.0, "slow": 200.0, "mid": 500.0})  # RTF x price x 1000, per type
    assert summary.cheapest["m"].machine == "mid"  # slow is cheaper but not real-time (RTF 2)
    assert summary.rivals["m"] == []  # fast costs twice as much: its interval does not reach mid's
    assert summary.merged is not None and [m.label for m in summary.merged.machines] == ["fast", "slow", "mid"]


def test_a_streams_cost_is_its_node_price_over_the_streams_it_serves_within_the_delay_target(tmp_path, monkeypatch):
    from helpers.fake_interfaces import use_test_environment
    from helpers.fake_streaming import write_fake_model
    from helpers.stream_configs import write_stream_yaml
    from sbprof.analysis.stream import analyse
    from sbprof.cli import main
    from sbprof.results import load_results

    use_test_environment(monkeypatch, tmp_path / "cache")
    model = write_fake_model(tmp_path / "fake", compute_s=0.02, frame_samples=400, final_chunks=0)
    path = write_stream_yaml(tmp_path / "s.yaml", str(model), audio_s=0.4, output_folder=tmp_path / "out",
                             capacity={"chunk_size": 8, "left_context_chunks": 2, "max_streams": 2})
    assert main(["stream", str(path), "--noprogressbar"]) == 0
    results = load_results(tmp_path / "out")
    capacity = analyse(results).settings[0].capacity
    row, = cost_rows("cpu", results, Price(per_hour=3.0))
    assert capacity.capacity and row.capacity == capacity.capacity and row.realtime
    assert row.cost.median == pytest.approx(3000.0 / capacity.capacity)  # the node's hour serves that many streams
    assert row.cost.low == pytest.approx(3000.0 / max(capacity.found))
