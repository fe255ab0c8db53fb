"""The machine's peak FLOP/s, and how close a counted, timed call comes to it.

- CPU: measured, with a matrix-product probe (``torch.mm`` of two square
  matrices of ``size``, in ``dtype``, with ``num_threads`` threads): the
  fastest of ``repeats`` timed calls, so it is what this machine's BLAS
  reaches on an ideal shape, not a datasheet figure.
- GPU: a table of vendor datasheet figures for dense (non-sparse) fp32,
  tf32, bf16 and fp16 by device name (:data:`GPU_PEAKS_TFLOPS`); a device
  not in the table is probed like the CPU. ``Peak.source`` says which.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

import torch

from sbprof.base.errors import BackendUnavailable, ConfigError
from sbprof.measuring.timing import measure
from sbprof.record.codec import Codec

#: (device-name pattern, {precision: dense TFLOP/s}) from NVIDIA datasheets (sparsity figures halved);
#: the first matching pattern wins, so specific variants come first.
GPU_PEAKS_TFLOPS: Tuple[Tuple[str, Dict[str, float]], ...] = (
    (r"H100.*PCIe", {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0}),
    (r"H100.*NVL", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}),
    (r"H100|H200", {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5}),
    (r"A100", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}),
    (r"\bL4\b", {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0}),
    (r"\bT4\b", {"fp32": 8.1, "fp16": 65.0}),
    (r"V100", {"fp32": 15.7, "fp16": 125.0}),
)

_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Peak(Codec):
    """Peak FLOP/s of one device at one precision, and where the figure comes from."""

    flops_per_s: float
    device: str
    precision: str
    source: str
    detail: str


@dataclass(frozen=True)
class Achieved(Codec):
    """FLOP/s achieved by a call of known FLOPs and measured time, and its share of a peak."""

    flops: int
    time_s: float
    flops_per_s: float
    share_of_peak: Optional[float]
    peak: Optional[Peak]


def achieved(flops: int, time_s: float, peak: Optional[Peak] = None) -> Achieved:
    """Achieved FLOP/s of ``flops`` done in ``time_s`` seconds, and its share of ``peak``.

    Example
    -------
    >>> peak = Peak(1e12, "cpu", "fp32", "matmul probe", "")
    >>> a = achieved(2 * 10 ** 9, 0.004, peak)
    >>> (a.flops_per_s, a.share_of_peak)
    (500000000000.0, 0.5)
    """
    if not time_s > 0:
        raise ConfigError(f"time_s must be > 0 seconds, got {time_s!r}")
    rate = flops / time_s
    return Achieved(int(flops), float(time_s), rate, rate / peak.flops_per_s if peak else None, peak)


def _probe(device: torch.device, precision: str, size: int, repeats: int,
           num_threads: Optional[int]) -> Tuple[float, str]:
    """FLOP/s of the fastest of ``repeats`` ``size x size`` products, and a line saying how."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ConfigError(f"size must be an integer >= 1, got {size!r}")
    dtype = _DTYPES[precision]
    g = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(size, size, generator=g).to(device=device, dtype=dtype)
    b = torch.randn(size, size, generator=g).to(device=device, dtype=dtype)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        m = measure(lambda: torch.mm(a, b), warmup=2, repeats=repeats, device=device,
                    num_threads=num_threads, track_memory=False)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    threads = f", {m.cell.threads} threads" if device.type == "cpu" else ""
    detail = f"torch.mm {size}x{size} {str(dtype).replace('torch.', '')}{threads}, fastest of {repeats} calls"
    return 2 * size ** 3 / min(m.wall_s), detail


def measure_cpu_peak(size: int = 1024, precision: str = "fp32", num_threads: Optional[int] = None,
                     repeats: int = 10) -> Peak:
    """The CPU's matrix-product FLOP/s, measured (see the module notes).

    Arguments
    ---------
    size : int
        Side of the square matrices.
    precision : str
        ``"fp32"``, ``"bf16"`` or ``"fp16"``.
    num_threads : int, optional
        Threads for the probe (default: torch's current setting).
    repeats : int
        Timed calls (after 2 warm-up calls).

    Returns
    -------
    Peak

    Example
    -------
    >>> p = measure_cpu_peak(size=64, repeats=3)
    >>> (p.source, p.precision, p.flops_per_s > 0)
    ('matmul probe', 'fp32', True)
    """
    if precision not in _DTYPES or precision == "tf32":
        raise ConfigError(f"CPU precision must be one of fp32, bf16, fp16, got {precision!r}")
    rate, detail = _probe(torch.device("cpu"), precision, size, repeats, num_threads)
    return Peak(rate, "cpu", precision, "matmul probe", detail)


def datasheet_peak(device_name: str, precision: str) -> Optional[float]:
    """Dense datasheet FLOP/s of a GPU by its name (``torch.cuda.get_device_name``), or None.

    Example
    -------
    >>> datasheet_peak("NVIDIA H100 80GB HBM3", "bf16")
    989500000000000.0
    >>> datasheet_peak("NVIDIA L40S", "fp32") is None
    True
    """
    for pattern, peaks in GPU_PEAKS_TFLOPS:
        if re.search(pattern, device_name):
            tflops = peaks.get(precision)
            return None if tflops is None else tflops * 1e12
    return None


def gpu_peak(device: Any = "cuda", precision: str = "fp32", size: int = 4096, repeats: int = 10) -> Peak:
    """A GPU's peak FLOP/s at ``precision``: the datasheet figure, else a matmul probe on it."""
    if precision not in _DTYPES:
        raise ConfigError(f"GPU precision must be one of {', '.join(_DTYPES)}, got {precision!r}")
    if not torch.cuda.is_available():
        raise BackendUnavailable("gpu_peak: CUDA is not available on this machine")
    dev = torch.device(device)
    if dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    name = torch.cuda.get_device_name(dev)
    label = f"{dev} ({name})"
    rate = datasheet_peak(name, precision)
    if rate is not None:
        return Peak(rate, label, precision, "datasheet", f"{name}: NVIDIA datasheet, dense {precision}")
    rate, detail = _probe(dev, precision, size, repeats, None)
    return Peak(rate, label, precision, "matmul probe", detail)


PEAK_CACHE_FILE = "peak_flops.json"


def cache_folder() -> Path:
    """Where sbprof keeps what it measures once per machine: ``$XDG_CACHE_HOME/sbprof`` (default ``~/.cache/sbprof``).

    Example
    -------
    >>> cache_folder().name
    'sbprof'
    """
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root).expanduser() / "sbprof"


def cached_cpu_peak(num_threads: int, log: Optional[Callable[[str], None]] = None,
                    folder: Optional[Path] = None) -> Peak:
    """:func:`measure_cpu_peak` run once per machine (CPU model, logical cores, threads, torch version) and kept in
    :func:`cache_folder`: a probe run beside another busy process reads low, and every later run would inherit
    that swing; with the cache, every run divides by the same figure (its ``detail`` says when it was measured).
    Delete the file to probe again. ``log`` receives a line before a probe; ``folder``: another cache folder.

    Example
    -------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> first = cached_cpu_peak(1, folder=folder)
    >>> cached_cpu_peak(1, folder=folder) == first and (folder / PEAK_CACHE_FILE).is_file()
    True
    """
    import json
    import platform
    import time

    from sbprof.results.files import atomic_write

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    key = f"{cpu}|{os.cpu_count()} logical cores|{num_threads} threads|torch {torch.__version__}|fp32"
    path = (folder or cache_folder()) / PEAK_CACHE_FILE
    table: Dict[str, Any] = {}
    try:
        loaded = json.loads(path.read_text())
        table = loaded if isinstance(loaded, dict) else {}
        if key in table:
            return Peak.from_dict(table[key])
    except Exception:  # noqa: BLE001  # no cache yet, or one that does not read: probe (and write it again)
        pass
    if log is not None:
        log(f"probing this CPU's peak FLOP/s with {num_threads} thread(s) (once per machine; kept in {path})")
    peak = measure_cpu_peak(num_threads=num_threads, repeats=20)
    peak = Peak(peak.flops_per_s, peak.device, peak.precision, peak.source,
                f"{peak.detail}; measured {time.strftime('%Y-%m-%d')}, kept in {path}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps({**table, key: peak.to_dict()}, indent=1))
    except OSError:  # a read-only home: the figure is still this run's
        pass
    return peak
