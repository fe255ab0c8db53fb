"""GPU paths: NCCL worlds and CUDA peaks where CUDA is present (skipped here); HolisticTraceAnalysis on GPU traces
only, imported only when used (a stand-in module where it is not installed)."""
import sys
import types

import pytest

from benchmarks.merge_ranks import write_run
from sbprof.distributed.merge import merge_run
from sbprof.report.distributed import render_run


class _Frame:
    def __init__(self, rows):
        self.rows = rows

    def to_dict(self, orient):
        assert orient == "records"
        return self.rows


def fake_hta(monkeypatch, calls):
    class TraceAnalysis:
        def __init__(self, trace_dir):
            calls.append(trace_dir)

        def get_temporal_breakdown(self, visualize):
            assert visualize is False
            return _Frame([{"rank": 0, "idle_time_pctg": 12.5, "compute_time_pctg": 80.0}])

        def get_comm_comp_overlap(self, visualize):
            return _Frame([{"rank": 0, "comp_comm_overlap_pctg": 41.0}])

    module = types.ModuleType("hta.trace_analysis")
    module.TraceAnalysis = TraceAnalysis
    monkeypatch.setitem(sys.modules, "hta", types.ModuleType("hta"))
    monkeypatch.setitem(sys.modules, "hta.trace_analysis", module)


def with_traces(run):
    (run / "traces").mkdir()
    (run / "traces" / "rank00000.1.pt.trace.json").write_text("{}")
    return run


def test_nccl_traces_go_to_hta_and_its_tables_into_the_report(tmp_path, monkeypatch):
    calls = []
    fake_hta(monkeypatch, calls)
    summary = merge_run(with_traces(write_run(tmp_path, 2, steps=3, backend="nccl")))
    assert calls == [str(tmp_path / "synthetic-2" / "traces")]
    assert summary.gpu["temporal_breakdown"] == [{"rank": 0.0, "idle_time_pctg": 12.5, "compute_time_pctg": 80.0}]
    assert "## GPU traces (HolisticTraceAnalysis): comm comp overlap" in render_run(summary)


def test_gloo_traces_never_go_to_hta(tmp_path, monkeypatch):
    calls = []
    fake_hta(monkeypatch, calls)
    summary = merge_run(with_traces(write_run(tmp_path, 2, steps=3)))
    assert calls == [] and summary.gpu is None and "its breakdown needs GPU kernels" in summary.notes[0]


def test_without_hta_the_report_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "hta", None)  # import fails
    summary = merge_run(with_traces(write_run(tmp_path, 2, steps=3, backend="nccl")))
    assert summary.gpu is None and "pip install 'sbprof[hta]'" in summary.notes[0]


@pytest.mark.cuda
@pytest.mark.slow
def test_an_nccl_world_reads_communication_from_nccl_kernels(tmp_path):
    from sbprof.registry import get_job
    from sbprof.jobs.runner import run_config
    from sbprof.results import load_results
    from sbprof.train.config import validate

    from helpers.train_tiny import tiny_overrides

    cfg = validate(tiny_overrides(tmp_path, devices="cuda:0", world_sizes=[1], variants=["ctc"],
                                  profiling={"export_trace": True}), "t.yaml", {"noprogressbar": True})
    results = load_results(run_config(get_job("train"), cfg, log=lambda line: None).results)
    (rank,) = [m for m in results.records if m.cell.rank is not None]
    assert rank.ok, (rank.status, rank.message)
    assert rank.settings["distributed"]["backend"] == "nccl" and rank.memory.peak_cuda_bytes > 0
    assert all(c > 0 for c in rank.extra["rank"]["comm_s"])  # DDP's all-reduce kernels
    assert len(rank.cuda_s) == len(rank.wall_s) and all(0 < c <= w * 1.05 for c, w in zip(rank.cuda_s,
                                                                                           rank.wall_s))


@pytest.mark.cuda
@pytest.mark.slow
def test_hta_reads_a_real_nccl_run(tmp_path):
    pytest.importorskip("hta")
    test_an_nccl_world_reads_communication_from_nccl_kernels(tmp_path)
    (run,) = (tmp_path / "ranks").iterdir()
    summary = merge_run(run)
    assert summary.gpu["temporal_breakdown"] and summary.gpu["comm_comp_overlap"]


@pytest.mark.cuda
def test_the_communication_clock_times_nccl_on_cuda_events(monkeypatch):
    """A one-rank NCCL world: DDP's default hook and a direct all-reduce, each a pair of CUDA events read later."""
    import time

    import torch
    import torch.distributed as dist

    from sbprof.distributed.comm_clock import CommClock, PendingComm
    from torchrun_tools import free_port

    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    clock = CommClock().install()
    try:
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4096, 4096).cuda(), device_ids=[0])
        start = time.perf_counter()
        model(torch.randn(64, 4096, device="cuda")).sum().backward()
        dist.all_reduce(torch.ones(1 << 24, device="cuda"))
        pending = clock.window(start, time.perf_counter())
        assert isinstance(pending, PendingComm) and len(pending.spans) >= 2  # the hook's buckets, the direct call
        torch.cuda.synchronize()
        assert pending.ready() and 0 < pending.seconds() < time.perf_counter() - start
    finally:
        clock.remove()
        dist.destroy_process_group()
