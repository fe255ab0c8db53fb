"""CUDA ground truth of memory: a known allocation (many small tensors and one large one, all held at once), read by
sbprof's CUDA peak (``measure``) and by the decorators' replay of the profiler's records (``report_memory``), against
the test's own ``torch.cuda.max_memory_allocated`` around the same call and the sizes rounded as the caching
allocator rounds them (512 bytes)."""
from __future__ import annotations

import pytest
import torch

from benchmarks.gpu_truths import Figure, allocator_bytes, check, exact
from sbprof import profile, report_memory
from sbprof.measuring.timing import measure

pytestmark = pytest.mark.cuda

SIZES = [1000] * 400 + [70_000] * 300 + [64 * 2 ** 20]  # bytes: 400 + 300 small blocks, one large one


def hold_all() -> None:
    held = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in SIZES]
    del held


def outside_peak() -> int:
    """The test's own reading: the allocator's peak over one call, above what was allocated before it."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    hold_all()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def test_cuda_peak_of_a_known_allocation_is_exact_to_the_allocators_rounding():
    torch.cuda.empty_cache()
    hold_all()  # the segments exist: later calls reuse them, as a step after the first does
    reference = outside_peak()
    check(exact("max_memory_allocated of the known allocation, against its sizes rounded up to 512 B", reference,
                allocator_bytes(SIZES)))
    m = measure(hold_all, warmup=1, repeats=2, device="cuda")
    check(exact(f"measure(): CUDA peak a call adds ({len(SIZES) - 1} small tensors + 64 MiB)",
                m.memory.peak_cuda_delta_bytes, reference))

    @profile(profile_memory=True)
    def run():
        hold_all()

    replayed = report_memory(run()).cuda_bytes
    diff = replayed - reference
    rounding = 512 * len(SIZES)  # the records may hold the requested sizes, below each block's rounding
    check(Figure("report_memory: CUDA peak replayed from the profiler's records (same allocation)",
                 f"{replayed:,} B", f"{reference:,} B (max_memory_allocated)",
                 "exact" if diff == 0 else f"off by {diff:+,} B (tolerance: the 512 B rounding of {len(SIZES)} "
                                           f"tensors, {-rounding:+,} to 0 B)", -rounding < diff <= 0))
