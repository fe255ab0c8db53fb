"""The machine's peak FLOP/s at the precision the work ran in, and how close a counted, timed call comes to it.

- CPU: measured, with a matrix-product probe (``torch.mm`` of two square
  matrices of ``size``, in ``dtype``, with ``num_threads`` threads): the
  fastest of ``repeats`` timed calls, so it is what this machine's BLAS
  reaches on an ideal shape, not a datasheet figure.
- GPU: the vendor's datasheet figure for dense (non-sparse) work at that
  precision, looked up by device name (:data:`GPU_PEAKS_TFLOPS`). A GPU or
  a precision not in the table has no peak ("peak unknown"): a probe would
  only say what one product reached, and a neighbour's figure would be wrong.

Which precision is the work's? :func:`work_precision` names the precision
one product ran in from its input's dtype and the TF32 switches (float32 on
CUDA is ``tf32`` when ``torch.backends.cuda.matmul.allow_tf32`` allows it
for products, or ``torch.backends.cudnn.allow_tf32`` for cuDNN's
convolutions and RNNs); under autocast a product's inputs are already cast,
so ``bf16``/``fp16`` is read as such. The FLOP counter adds up the MACs of
each precision (``FlopCount.macs_by_precision``), and a share of peak uses
the peak of the precision that did most of them
(:func:`dominant_precision`): the share then says how close the work that
dominates came to what the hardware offers for it.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import torch

from sbprof.base.errors import BackendUnavailable, ConfigError
from sbprof.measuring.timing import measure
from sbprof.record.codec import Codec

_HOPPER_SXM = {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5}
_HOPPER_NVL = {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}

#: (pattern on ``torch.cuda.get_device_name``, {precision: dense TFLOP/s}): the first pattern that matches wins,
#: so variants come before their family. Figures are the datasheets' dense ones (a figure given "with sparsity"
#: is halved); fp16 is the rate with FP32 accumulation, which is what PyTorch's half-precision products use.
#: A GPU absent here, or a precision absent from its row, reads "peak unknown".
GPU_PEAKS_TFLOPS: Tuple[Tuple[str, Dict[str, float]], ...] = (
    # "NVIDIA H100 Tensor Core GPU" datasheet: the PCIe, NVL and SXM columns.
    (r"\bH100\b.*PCIe", {"fp32": 51.0, "tf32": 378.0, "bf16": 756.5, "fp16": 756.5}),
    (r"\bH100\b.*NVL", _HOPPER_NVL),
    (r"\bH100\b", _HOPPER_SXM),
    # "NVIDIA H200 Tensor Core GPU" datasheet: H200 NVL and H200 SXM (the SXM's figures are the H100 SXM's).
    (r"\bH200\b.*NVL", _HOPPER_NVL),
    (r"\bH200\b", _HOPPER_SXM),
    # "NVIDIA A100 Tensor Core GPU" datasheet: the same figures for 40 and 80 GB, PCIe and SXM.
    (r"\bA100\b", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}),
    # "NVIDIA L40S GPU" datasheet.
    (r"\bL40S\b", {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05}),
    # "NVIDIA L4 Tensor Core GPU" datasheet.
    (r"\bL4\b", {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0}),
    # "NVIDIA A10 Tensor Core GPU" datasheet (not the A10G, whose figures NVIDIA does not publish).
    (r"\bA10\b", {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0}),
    # "NVIDIA T4 Tensor Core GPU" datasheet: FP16/FP32 mixed precision; Turing has no TF32 or BF16 tensor cores.
    (r"\bT4\b", {"fp32": 8.1, "fp16": 65.0}),
    # "NVIDIA Ada GPU Architecture" whitepaper, GeForce RTX 4090 (not the 4090 D or the laptop part).
    (r"\bRTX 4090$", {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2}),
    # "NVIDIA Ampere GA102 GPU Architecture" whitepaper, GeForce RTX 3090 (not the 3090 Ti).
    (r"\bRTX 3090$", {"fp32": 35.6, "tf32": 35.6, "bf16": 71.0, "fp16": 71.0}),
    # "NVIDIA V100 Tensor Core GPU" datasheet: V100S PCIe, V100 PCIe, V100 SXM2.
    (r"\bV100S\b", {"fp32": 16.4, "fp16": 130.0}),
    (r"\bV100\b.*PCIE", {"fp32": 14.0, "fp16": 112.0}),
    (r"\bV100\b", {"fp32": 15.7, "fp16": 125.0}),
)

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
_CPU_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


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


def _probe(precision: str, size: int, repeats: int, num_threads: Optional[int]) -> Tuple[float, str]:
    """FLOP/s of the fastest of ``repeats`` ``size x size`` products on the CPU, and a line saying how."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ConfigError(f"size must be an integer >= 1, got {size!r}")
    dtype = _CPU_DTYPES[precision]
    g = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(size, size, generator=g).to(dtype=dtype)
    b = torch.randn(size, size, generator=g).to(dtype=dtype)
    m = measure(lambda: torch.mm(a, b), warmup=2, repeats=repeats, num_threads=num_threads, track_memory=False)
    detail = (f"torch.mm {size}x{size} {str(dtype).replace('torch.', '')}, {m.cell.threads} threads, "
              f"fastest of {repeats} calls")
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
    if precision not in _CPU_DTYPES:
        raise ConfigError(f"CPU precision must be one of fp32, bf16, fp16, got {precision!r}")
    rate, detail = _probe(precision, size, repeats, num_threads)
    return Peak(rate, "cpu", precision, "matmul probe", detail)


def work_precision(dtype: Any, device_type: str, tf32_allowed: bool) -> str:
    """The precision a product with inputs of ``dtype`` runs in (see the module notes).

    Example
    -------
    >>> work_precision(torch.float32, "cuda", True), work_precision(torch.float32, "cpu", True)
    ('tf32', 'fp32')
    >>> work_precision(torch.bfloat16, "cuda", False), work_precision(torch.float64, "cpu", False)
    ('bf16', 'float64')
    """
    if dtype == torch.float32:
        return "tf32" if tf32_allowed and device_type == "cuda" else "fp32"
    if dtype == torch.bfloat16:
        return "bf16"
    if dtype == torch.float16:
        return "fp16"
    return str(dtype).replace("torch.", "")


def dominant_precision(macs_by_precision: Mapping[str, float]) -> Optional[str]:
    """The precision that did most of the MACs, or None when none was counted.

    Example
    -------
    >>> dominant_precision({"fp32": 10, "bf16": 90}), dominant_precision({})
    ('bf16', None)
    """
    counted = {k: v for k, v in macs_by_precision.items() if v > 0}
    return max(sorted(counted), key=counted.__getitem__) if counted else None


def datasheet_peak(device_name: str, precision: str) -> Tuple[Optional[float], str]:
    """Dense datasheet FLOP/s of a GPU by its name (``torch.cuda.get_device_name``), and where it comes from;
    ``(None, why)`` when the table has no figure for it.

    Example
    -------
    >>> datasheet_peak("NVIDIA H100 80GB HBM3", "bf16")
    (989500000000000.0, 'NVIDIA H100 80GB HBM3: datasheet, dense bf16')
    >>> datasheet_peak("Tesla T4", "tf32")[0] == datasheet_peak("Tesla T4", "fp32")[0]  # no TF32 on Turing
    True
    >>> datasheet_peak("NVIDIA A10G", "fp32")
    (None, "peak unknown: NVIDIA A10G is not in sbprof's datasheet table")
    """
    for pattern, peaks in GPU_PEAKS_TFLOPS:
        if not re.search(pattern, device_name):
            continue
        if precision == "tf32" and "tf32" not in peaks and "fp32" in peaks:
            # Before Ampere there are no TF32 tensor cores: float32 products run at the fp32 rate whatever the switch.
            return peaks["fp32"] * 1e12, f"{device_name}: datasheet, dense fp32 (no TF32 on this GPU)"
        if precision not in peaks:
            return None, f"peak unknown: the datasheet of {device_name} gives no dense {precision} figure"
        return peaks[precision] * 1e12, f"{device_name}: datasheet, dense {precision}"
    return None, f"peak unknown: {device_name} is not in sbprof's datasheet table"


def gpu_peak(device: Any = "cuda", precision: str = "fp32") -> Peak:
    """A GPU's dense datasheet peak FLOP/s at ``precision``; BackendUnavailable ("peak unknown: ...") when the
    table has none for it (see :data:`GPU_PEAKS_TFLOPS`)."""
    if precision not in PRECISIONS:
        raise ConfigError(f"GPU precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if not torch.cuda.is_available():
        raise BackendUnavailable("gpu_peak: CUDA is not available on this machine")
    dev = torch.device(device)
    if dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    name = torch.cuda.get_device_name(dev)
    rate, detail = datasheet_peak(name, precision)
    if rate is None:
        raise BackendUnavailable(detail)
    return Peak(rate, f"{dev} ({name})", precision, "datasheet", detail)


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
                    folder: Optional[Path] = None, precision: str = "fp32") -> Peak:
    """:func:`measure_cpu_peak` run once per machine (CPU model, logical cores, threads, torch version, precision)
    and kept in
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

    from sbprof.base.atomic import atomic_write

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    key = f"{cpu}|{os.cpu_count()} logical cores|{num_threads} threads|torch {torch.__version__}|{precision}"
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
        log(f"probing this CPU's peak FLOP/s ({precision}) with {num_threads} thread(s) (once per machine; kept in "
            f"{path})")
    peak = measure_cpu_peak(precision=precision, num_threads=num_threads, repeats=20)
    peak = Peak(peak.flops_per_s, peak.device, peak.precision, peak.source,
                f"{peak.detail}; measured {time.strftime('%Y-%m-%d')}, kept in {path}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps({**table, key: peak.to_dict()}, indent=1))
    except OSError:  # a read-only home: the figure is still this run's
        pass
    return peak
