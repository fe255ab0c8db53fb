"""GPU energy from NVML's cumulative energy counter (nvidia-ml-py).

``nvmlDeviceGetTotalEnergyConsumption`` gives the energy a GPU has used
since the driver loaded, in millijoules, on Volta and newer GPUs; a window's
energy is the difference of two readings (a 64-bit counter: no wrap in
practice). The driver refreshes the counter periodically, so a window
shorter than its update period can read zero (zeus warns of the same):
measure over many calls and divide. sbprof calls nvidia-ml-py directly: zeus reads
the very same counter through it, and would add some twenty packages
(pandas, scikit-learn, pydantic, ...) for no extra measurement; its
fallback for older GPUs integrates sampled power, which is an estimate this
module does not make.

Indices are NVML's (PCI bus order), which match CUDA's only with
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and no ``CUDA_VISIBLE_DEVICES`` remapping.
"""
from __future__ import annotations

import importlib
from typing import Any, Dict, Optional, Sequence

from sbprof.base.errors import BackendUnavailable


def _load_pynvml() -> Any:
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        raise BackendUnavailable("nvidia-ml-py is not installed (pip install nvidia-ml-py)") from None


class NvmlCounter:
    """Reads the cumulative energy counters of NVIDIA GPUs.

    Arguments
    ---------
    gpu_indices : sequence of int, optional
        NVML indices to read; ``None`` reads every GPU.

    Raises
    ------
    BackendUnavailable
        nvidia-ml-py missing, no NVIDIA driver (NVML library not found), no
        GPU, or a GPU without an energy counter (older than Volta).
    """

    def __init__(self, gpu_indices: Optional[Sequence[int]] = None):
        self._nvml = nvml = _load_pynvml()
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as err:
            raise BackendUnavailable(f"NVML unavailable: {err}") from None
        try:
            count = nvml.nvmlDeviceGetCount()
            indices = list(range(count)) if gpu_indices is None else list(gpu_indices)
            if not indices:
                raise BackendUnavailable("no NVIDIA GPU to read" if count == 0 else "no GPU index requested")
            bad = [i for i in indices if not 0 <= i < count]
            if bad:
                raise BackendUnavailable(f"GPU index {bad} out of range: NVML sees {count} GPU(s)")
            self._handles: Dict[str, Any] = {}
            for i in indices:
                handle = nvml.nvmlDeviceGetHandleByIndex(i)
                try:
                    nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
                except nvml.NVMLError as err:
                    raise BackendUnavailable(
                        f"GPU {i} has no readable energy counter ({err}); NVML provides it on Volta and newer"
                    ) from None
                self._handles[f"gpu:{i}"] = handle
        except BackendUnavailable:
            nvml.nvmlShutdown()
            raise

    def read_mj(self) -> Dict[str, int]:
        """Each GPU's cumulative energy in millijoules, keyed ``gpu:<index>``."""
        return {d: int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h)) for d, h in self._handles.items()}

    def close(self) -> None:
        """Release NVML (reference counted by the library)."""
        self._nvml.nvmlShutdown()
