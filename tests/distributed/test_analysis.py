"""The two-pass analysis of a run's ranks on hand-made records with known answers."""
import pytest

from sbprof.analysis.distributed import RunAnalysis, summarise_run
from sbprof.analysis.rank_rows import MissingRank
from sbprof.analysis.rank_sections import SHOWN_EACH_SIDE
from sbprof.record import Cell, Measurement, MemoryPeak


def record(rank, walls, comms, gaps=None, node=0, end="exit", utterances=None):
    world = {"rank": rank, "local_rank": rank % 2, "node_rank": node, "host": f"host{node}", "backend": "gloo"}
    extra = {"rank": {"section": "step", "steps": list(range(len(walls))), "comm_s": comms,
                      "gap_s": gaps or [None] * len(walls), "end": end, "last_step": len(walls) - 1}}
    if utterances is not None:
        extra["utterances_per_step"] = [utterances] * len(walls)
    return Measurement(label=f"rank {rank}", cell=Cell(model="step", rank=rank), wall_s=walls, cpu_s=walls,
                       memory=MemoryPeak(peak_rss_bytes=1000 * (rank + 1)), settings={"distributed": world},
                       extra=extra)


def analyse(records, world_size=None, missing=()):
    run = RunAnalysis(world_size or len(records))
    for m in records:
        run.add_steps(m)
    rows = [run.add_rank(m) for m in records]
    for m in missing:
        run.add_missing(m)
    return rows, summarise_run(run, "r", "gloo", "here")


def test_waiting_is_measured_step_by_step_against_the_fastest_rank_of_that_step():
    # The straggler moves: rank r is 0.3 s slow at step r, so each rank waits 0.3 s in two steps of three.
    comms = [[0.02 if step == rank else 0.32 for step in range(3)] for rank in range(3)]
    rows, summary = analyse([record(r, [0.5, 0.5, 0.5], comms[r]) for r in range(3)])
    assert [r.wait_s for r in rows] == pytest.approx([0.3, 0.3, 0.3])
    # A share beside a median is that median's share: the median wait 0.3 s of the median step 0.5 s
    assert [r.wait_share for r in rows] == pytest.approx([0.6, 0.6, 0.6])
    assert summary.sections[0].imbalance == pytest.approx(1.0)  # every rank busy 0.2 s per step at the median


def test_between_steps_peak_memory_and_throughput():
    rows, summary = analyse([record(0, [0.2, 0.4], [0.0, 0.0], gaps=[0.05, 0.15], utterances=4.0),
                             record(1, [0.3, 0.3], [0.0, 0.0], gaps=[0.05, 0.05], utterances=4.0)])
    assert rows[0].between_share == pytest.approx(0.2 / 0.8) and rows[0].between_s == pytest.approx(0.1)
    s = summary.sections[0]
    assert s.peak.rank == 1 and s.peak.peak_bytes == 2000
    # steps end when the slowest rank's does: 0.3 s, then 0.4 s; 8 utterances per step
    assert s.throughput.utterances_per_s == pytest.approx(16 / 0.7) and s.throughput.steps == 2


def test_cpu_time_and_cost_per_rank_are_replays_of_its_steps_and_absent_without_a_cpu_clock():
    spinning = record(0, [0.2, 0.4, 0.3], [0.0, 0.0, 0.0])
    spinning.cpu_s = [0.1, 0.3, 0.2]  # e.g. an OpenMP worker pool: CPU time need not follow the wall clock
    spinning.extra["audio_s_per_step"] = [2.0, 2.0, 1.0]
    rebuilt = record(1, [0.3, 0.3, 0.3], [0.0, 0.0, 0.0])
    rebuilt.cpu_s = [0.0, 0.0, 0.0]  # a merge rebuilt from lines without cpu_s reads 0: unknown, not free
    rows, summary = analyse([spinning, rebuilt])
    assert rows[0].cpu.median == pytest.approx(0.2) and rows[0].cpu_cost == pytest.approx(0.6 / 5.0)
    assert rows[1].cpu is None and rows[1].cpu_cost is None
    s = summary.sections[0]
    assert s.cpu_s == pytest.approx(0.2) and s.cpu_cost == pytest.approx(0.12)  # the one rank that has them
    no_audio, _ = analyse([record(0, [0.2, 0.4], [0.0, 0.0])])
    assert no_audio[0].cpu.median == pytest.approx(0.3) and no_audio[0].cpu_cost is None


def test_ranks_group_by_host_and_node_and_a_large_world_shows_its_extremes():
    records = [record(r, [1.0 + r / 100], [0.0], node=r // 8) for r in range(40)]
    _, summary = analyse(records)
    s = summary.sections[0]
    assert [(h.node_rank, h.ranks[0], len(h.ranks)) for h in s.hosts] == [(n, 8 * n, 8) for n in range(5)]
    assert [r.rank for r in s.shown] == list(range(SHOWN_EACH_SIDE)) + list(range(40 - SHOWN_EACH_SIDE, 40))
    assert s.slowest.rank == 39


def test_missing_and_early_stopped_ranks_make_the_run_incomplete():
    _, summary = analyse([record(0, [0.1], [0.0], end="SIGTERM")], world_size=2,
                         missing=[MissingRank(1, 7, "no end line")])
    assert not summary.complete and [m.rank for m in summary.missing] == [1]
    assert [r.rank for r in summary.stopped_early] == [0]
