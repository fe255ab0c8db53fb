"""Peak memory of a measured region: CPU (process resident set) and CUDA allocator.

CPU: Linux lets a process reset its own peak-RSS mark by writing ``5`` to
``/proc/self/clear_refs``; afterwards ``VmHWM`` restarts from the current RSS,
so the region's peak is exact to the page with no sampling thread. Where the
kernel refuses the reset (other OSes, some containers) we fall back to a
psutil sampling thread, which can miss peaks shorter than its period; the
method used is stored with every reading so results say how they were taken.

Heap retention: glibc keeps small freed blocks (e.g. many 64 KiB tensors,
as real activations are) mapped for reuse, so a region that reuses them adds
no resident memory although it holds as much live. :func:`release_heap`
(garbage collection, then ``malloc_trim(0)``) returns them to the system
right before a region, so its growth is what the region itself needs.

CUDA: ``torch.cuda.reset_peak_memory_stats`` before the region and
``max_memory_allocated`` after. Without CUDA there is no CUDA reading at all
(``torch.cuda.max_memory_allocated`` silently returns 0 there; we never
report that as a measurement).
"""
from __future__ import annotations

import ctypes
import functools
import gc
import mmap
import threading
from typing import Optional

from sbprof.base.errors import BackendUnavailable

_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"
SAMPLING_PERIOD_S = 0.001


@functools.lru_cache(maxsize=None)
def _malloc_trim() -> Optional[object]:
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to trim with
        return None


def release_heap(generation: int = 2) -> Optional[str]:
    """Collect garbage (up to ``generation``: 2 is every object, 1 only the recent ones, which is what a step just
    left behind and much cheaper in a process holding millions of objects) and hand freed heap pages back to the
    system.

    Returns the method used (``"malloc_trim"``), or ``None`` where the C
    library has no such call (then retained heap can hide a region's growth).

    Example
    -------
    >>> release_heap() in ("malloc_trim", None)
    True
    """
    gc.collect(generation)
    trim = _malloc_trim()
    if trim is None:
        return None
    trim(0)
    return "malloc_trim"


def release_memory(device: str) -> None:
    """Hand freed memory back between cells so one cell's peak does not inflate the next."""
    release_heap()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def _read_status_kib(field: str) -> int:
    with open(_STATUS) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def current_rss_bytes() -> int:
    """The process's resident set now, in bytes (``/proc/self/statm``; psutil where there is no ``/proc``).

    Example
    -------
    >>> current_rss_bytes() > 0
    True
    """
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * mmap.PAGESIZE
    except OSError:
        import psutil

        return int(psutil.Process().memory_info().rss)


@functools.lru_cache(maxsize=None)
def _can_reset_hwm() -> bool:
    """Whether writing ``5`` to clear_refs really resets VmHWM on this kernel.

    Some kernels accept the write and do nothing (seen in a Firecracker
    guest), so we check the effect: raise the mark with a touched 32 MiB
    mapping, unmap it, reset, and see the mark fall back near the RSS. The
    probe maps its own pages (never the heap), so it leaves no freed heap
    behind for the first measured region to reuse unseen.
    """
    probe = 32 * 2**20
    try:
        buf = mmap.mmap(-1, probe)
        for offset in range(0, probe, mmap.PAGESIZE):  # touched, so every page becomes resident
            buf[offset] = 1
        buf.close()
        with open(_CLEAR_REFS, "w") as f:
            f.write("5")
        return _read_status_kib("VmHWM") < _read_status_kib("VmRSS") + probe // 2
    except (OSError, KeyError):
        return False


class CpuPeak:
    """Peak resident memory of the process between :meth:`start` and :meth:`stop`.

    :meth:`start` first hands freed heap back to the system (:func:`release_heap`;
    ``heap_trim`` says whether it could): glibc serves even a large request
    from a free heap chunk when one fits, and such pages are already resident,
    so without the trim a region could allocate hundreds of MiB and read 0.
    ``gc_generation``: how far the garbage collection before it goes (see
    :func:`release_heap`).

    Example
    -------
    >>> import torch
    >>> tracker = CpuPeak()
    >>> tracker.start()
    >>> x = torch.ones(64 * 2**20 // 4)  # 64 MiB, touched
    >>> del x
    >>> peak, delta = tracker.stop()
    >>> delta >= 60 * 2**20
    True
    """

    def __init__(self, method: Optional[str] = None, gc_generation: int = 2):
        self.gc_generation = gc_generation
        if method is None:
            method = "clear_refs" if _can_reset_hwm() else "psutil_sampling"
        if method not in ("clear_refs", "psutil_sampling"):
            raise ValueError(f"unknown CPU peak method {method!r}")
        if method == "clear_refs" and not _can_reset_hwm():
            raise BackendUnavailable("this kernel does not reset VmHWM through /proc/self/clear_refs; "
                                     "use method='psutil_sampling'")
        self.method = method
        self.heap_trim: Optional[str] = None
        self._proc = None
        self._baseline = 0
        self._sampled_peak = 0
        self._stop_event = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        self.heap_trim = release_heap(self.gc_generation)
        if self.method == "clear_refs":
            with open(_CLEAR_REFS, "w") as f:
                f.write("5")
            # After the reset VmHWM equals the current RSS: that is our baseline.
            self._baseline = _read_status_kib("VmHWM")
        else:
            import psutil  # only the fallback needs it

            self._proc = psutil.Process()
            self._baseline = self._sampled_peak = self._proc.memory_info().rss
            self._stop_event.clear()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()

    def _sample(self) -> None:
        while not self._stop_event.is_set():
            self._sampled_peak = max(self._sampled_peak, self._proc.memory_info().rss)
            self._stop_event.wait(SAMPLING_PERIOD_S)

    def stop(self) -> tuple:
        """Return ``(peak_bytes, peak_minus_baseline_bytes)`` of the region."""
        if self.method == "clear_refs":
            peak = _read_status_kib("VmHWM")
        else:
            self._stop_event.set()
            if self._thread is not None:
                self._thread.join()
            peak = max(self._sampled_peak, self._proc.memory_info().rss)
        return peak, peak - self._baseline


class CudaPeak:
    """Peak of PyTorch's CUDA caching allocator between :meth:`start` and :meth:`stop`."""

    def __init__(self, device):
        import torch

        self.device = torch.device(device)
        self._torch = torch
        self._baseline = 0

    def start(self) -> None:
        cuda = self._torch.cuda
        cuda.synchronize(self.device)
        cuda.reset_peak_memory_stats(self.device)
        self._baseline = cuda.memory_allocated(self.device)

    def stop(self) -> tuple:
        """Return ``(peak_allocated, peak_minus_baseline, peak_reserved)`` in bytes."""
        cuda = self._torch.cuda
        cuda.synchronize(self.device)
        peak = cuda.max_memory_allocated(self.device)
        return peak, peak - self._baseline, cuda.max_memory_reserved(self.device)
