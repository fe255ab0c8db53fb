"""CPU peak memory against known allocations (tolerances: a few MiB of allocator/page slack)."""
import time

import pytest
import torch

from sbprof.memory import CpuPeak

MiB = 2**20


def _alloc(mib: int) -> torch.Tensor:
    return torch.ones(mib * MiB // 4)  # ones() touches every page, so it is resident


@pytest.mark.parametrize("method", ["clear_refs", "psutil_sampling"])
def test_known_allocation_is_seen(method):
    tracker = CpuPeak(method=method)
    tracker.start()
    x = _alloc(256)
    time.sleep(0.05)  # lets the sampling fallback see it; clear_refs needs no wait
    del x
    peak, delta = tracker.stop()
    assert 256 * MiB <= delta + MiB  # at most a page table's worth below
    assert delta < 256 * MiB + 16 * MiB
    assert peak >= delta


def test_earlier_peak_does_not_leak_into_later_region():
    first = CpuPeak()
    first.start()
    x = _alloc(512)
    del x
    big_peak, _ = first.stop()
    second = CpuPeak()
    second.start()
    y = _alloc(64)
    del y
    peak, delta = second.stop()
    if second.method == "clear_refs":  # the sampling fallback cannot see freed history anyway
        assert peak < big_peak - 256 * MiB
    assert 63 * MiB <= delta < 64 * MiB + 16 * MiB


def test_unknown_method_refused():
    with pytest.raises(ValueError):
        CpuPeak(method="guess")
