"""What machine and which library versions a measurement was taken with."""
from __future__ import annotations

import functools
import glob
import os
import platform
import subprocess
import sys
from importlib import metadata
from typing import Any, Optional, Tuple

from sbprof.record import Env


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> Optional[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(
            ["git", "-C", here, "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _llc_bytes() -> Optional[int]:
    """The CPU's last-level cache (the highest level holding data), from sysfs; ``None`` where it is not listed.

    A working set that outgrows it runs at memory bandwidth instead of cache
    bandwidth: predictions never carry a cost model across that line.
    """
    best: Optional[tuple] = None
    for index in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
        try:
            with open(f"{index}/type") as f:
                kind = f.read().strip()
            with open(f"{index}/level") as f:
                level = int(f.read())
            with open(f"{index}/size") as f:
                text = f.read().strip()
        except (OSError, ValueError):
            continue
        units = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}
        size = int(text[:-1]) * units[text[-1]] if text[-1:] in units else int(text or 0)
        if kind in ("Unified", "Data") and (best is None or level > best[0]):
            best = (level, size)
    return best[1] if best else None


def _gpu_name(torch: Any) -> str:
    """The first GPU's name, read without initialising CUDA in this process.

    ``torch.cuda.get_device_name`` creates a CUDA context (hundreds of MB of
    resident memory and extra threads): a CPU measurement must not pay for
    it. The NVIDIA driver's /proc entry names the GPU for free; only when
    CUDA is already in use do we ask torch.
    """
    if torch.cuda.is_initialized():
        return torch.cuda.get_device_name()
    for info in sorted(glob.glob("/proc/driver/nvidia/gpus/*/information")):
        try:
            with open(info) as f:
                for line in f:
                    if line.startswith("Model:"):
                        return line.split(":", 1)[1].strip()
        except OSError:
            continue
    return "CUDA GPU (name not read, to keep CUDA uninitialised)"


@functools.lru_cache(maxsize=None)
def collect_env() -> Env:
    """Describe this process's machine and libraries (cached: it does not change).

    Reading it never initialises CUDA (see :func:`_gpu_name`).

    Example
    -------
    >>> env = collect_env()
    >>> env.cpu_count >= 1 and env.torch != ""
    True
    """
    import torch

    cuda = torch.version.cuda if torch.cuda.is_available() else None
    return Env(
        python=sys.version.split()[0],
        platform=platform.platform(),
        cpu=_cpu_name(),
        cpu_count=os.cpu_count() or 1,
        llc_bytes=_llc_bytes(),
        torch=torch.__version__,
        torchaudio=_version("torchaudio"),
        speechbrain=_version("speechbrain"),
        cuda=cuda,
        gpu=_gpu_name(torch) if cuda else None,
        sbprof=_version("sbprof"),
        git_commit=_git_commit(),
    )


def load_average() -> Optional[float]:
    """The machine's 1-minute load average, or ``None`` where the OS has none.

    Read right after a cell's measured batches and stored with it: a load
    above the cell's own thread count means other processes competed for the
    CPU while it was timed, which no statistic over the batches can reveal.
    """
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


class OthersCpu:
    """CPU time that other processes took while a region ran: ``with OthersCpu() as o: ...; o.cpu_s, o.wall_s``.

    The machine's busy time (every core, from ``/proc/stat`` through psutil,
    hypervisor steal included) minus this process's own (all its threads),
    over the region. ``cpu_s / wall_s`` is how many cores others kept busy:
    a worker with ``t`` threads on ``c`` cores competes for them once
    ``t + cpu_s / wall_s > c``, which its thread count alone cannot show.
    The kernel counts in ticks (10 ms), so short regions read coarsely:
    readers sum regions before dividing. ``None`` fields where psutil cannot
    read the counters.

    Example
    -------
    >>> with OthersCpu() as others:
    ...     _ = sum(range(10 ** 5))
    >>> others.wall_s > 0 and (others.cpu_s is None or others.cpu_s >= 0)
    True
    """

    def __enter__(self) -> "OthersCpu":
        import time

        self._clock = time.perf_counter
        self.cpu_s: Optional[float] = None
        self.wall_s = 0.0
        self._start = cpu_counters()
        self._t0 = self._clock()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.wall_s = self._clock() - self._t0
        end = cpu_counters() if self._start is not None else None
        if end is None:
            return
        # Ticks of the machine and of the process are sampled at different instants: clip the small negatives.
        self.cpu_s = max(0.0, (end[0] - self._start[0]) - (end[1] - self._start[1]))


@functools.lru_cache(maxsize=1)
def _this_process(pid: int) -> Any:
    """psutil's handle of this process, made once per process id (making one costs more than reading it)."""
    import psutil

    return psutil.Process(pid)


def cpu_counters() -> Optional[Tuple[float, float]]:
    """The machine's busy CPU seconds since boot (every core, from ``/proc/stat`` through psutil, hypervisor steal
    included) and this process's own (every thread), or ``None`` where psutil cannot read them.

    Example
    -------
    >>> counters = cpu_counters()
    >>> counters is None or counters[0] >= counters[1] >= 0
    True
    """
    import psutil

    try:
        times, own = psutil.cpu_times(), _this_process(os.getpid()).cpu_times()
    except (OSError, psutil.Error):
        return None
    busy = sum(getattr(times, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq", "steal"))
    return busy, own.user + own.system
