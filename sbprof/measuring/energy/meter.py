"""Measure the energy of a window of work from every counter this machine exposes."""
from __future__ import annotations

import threading
import time
from typing import Dict, Optional, Sequence

from sbprof.measuring.energy.nvml import NvmlCounter
from sbprof.measuring.energy.powercap import POWERCAP_ROOT, RaplCounter
from sbprof.record.measurement import Energy
from sbprof.base.errors import BackendUnavailable, ConfigError, MeasurementError


class EnergyMeter:
    """Start-stop window over RAPL (CPU) and NVML (GPU) counters; also a context manager.

    Counters that cannot be read here are listed with the reason in the
    result's ``unavailable``; nothing is estimated. While the window is open
    a daemon thread reads the RAPL counters every ``poll_s`` seconds so that
    their wrap-around is counted however long the window is.

    Arguments
    ---------
    cpu : bool
        Read RAPL package (and sub-zone) counters.
    gpu : bool
        Read NVML GPU energy counters.
    gpu_indices : sequence of int, optional
        NVML indices; ``None``: every GPU.
    powercap_root : str
        Where to find RAPL (a fake tree in tests).
    poll_s : float
        RAPL polling period; must be shorter than the counter's wrap period.

    Example
    -------
    >>> with EnergyMeter(powercap_root="/nonexistent", gpu=False) as meter:
    ...     _ = sum(range(1000))
    >>> meter.result.measurable, meter.result.describe().startswith("not measurable here (rapl: no /nonexistent")
    (False, True)
    """

    def __init__(
        self,
        cpu: bool = True,
        gpu: bool = True,
        gpu_indices: Optional[Sequence[int]] = None,
        powercap_root: str = POWERCAP_ROOT,
        poll_s: float = 10.0,
    ):
        if not poll_s > 0:
            raise ConfigError(f"poll_s must be positive, got {poll_s}")
        self.cpu, self.gpu, self.gpu_indices = cpu, gpu, gpu_indices
        self.powercap_root, self.poll_s = powercap_root, poll_s
        self.result: Optional[Energy] = None
        self._rapl: Optional[RaplCounter] = None
        self._nvml: Optional[NvmlCounter] = None
        self._unavailable: Dict[str, str] = {}
        self._stop_polling = threading.Event()
        self._poller: Optional[threading.Thread] = None
        self._t0 = self._unix0 = 0.0
        self._gpu0: Dict[str, int] = {}
        self._running = False
        self._poll_error: Optional[Exception] = None

    def start(self) -> None:
        """Open the window: find the readable counters and take first readings."""
        if self._running:
            raise MeasurementError("EnergyMeter.start() called while its window is open")
        self._unavailable = {}
        self._poll_error = None
        if self.cpu:
            try:
                self._rapl = RaplCounter(self.powercap_root)
            except BackendUnavailable as err:
                self._unavailable["rapl"] = str(err)
        if self.gpu:
            try:
                self._nvml = NvmlCounter(self.gpu_indices)
            except BackendUnavailable as err:
                self._unavailable["nvml"] = str(err)
        self._unix0, self._t0 = time.time(), time.perf_counter()
        if self._rapl is not None:
            self._rapl.start()
            self._stop_polling.clear()
            self._poller = threading.Thread(target=self._poll_rapl, name="sbprof-rapl-poll", daemon=True)
            self._poller.start()
        if self._nvml is not None:
            self._gpu0 = self._nvml.read_mj()
        self._running = True

    def _poll_rapl(self) -> None:
        try:
            while not self._stop_polling.wait(self.poll_s):
                self._rapl.poll()
        except (OSError, ValueError) as err:
            # A missed poll could hide a wrap: stop() reports it instead of a wrong figure.
            self._poll_error = err

    def stop(self) -> Energy:
        """Close the window and return the energy per domain (also kept in ``result``)."""
        if not self._running:
            raise MeasurementError("EnergyMeter.stop() called before start()")
        self._running = False
        joules: Dict[str, float] = {}
        sources: Dict[str, str] = {}
        try:
            gpu1 = self._nvml.read_mj() if self._nvml is not None else {}
            if self._rapl is not None:
                self._stop_polling.set()
                self._poller.join()  # after this the counter is ours alone
                if self._poll_error is not None:
                    raise MeasurementError(f"reading RAPL counters failed during the window: {self._poll_error}")
                for domain, j in self._rapl.poll().items():
                    joules[domain], sources[domain] = j, "rapl"
            t1, unix1 = time.perf_counter(), time.time()
        finally:
            if self._nvml is not None:
                self._nvml.close()
            self._rapl = self._nvml = None
        for domain, mj in gpu1.items():
            joules[domain], sources[domain] = (mj - self._gpu0[domain]) / 1e3, "nvml"
        self.result = Energy(duration_s=t1 - self._t0, start_unix_s=self._unix0, end_unix_s=unix1,
                                   joules=joules, sources=sources, unavailable=dict(self._unavailable))
        return self.result

    def __enter__(self) -> "EnergyMeter":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
