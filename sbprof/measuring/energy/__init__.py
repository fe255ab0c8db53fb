"""Measured energy, never estimated.

- :class:`~sbprof.measuring.energy.meter.EnergyMeter`: a start-stop window (or
  ``with`` block) over the counters this machine exposes: CPU package energy
  from RAPL (Linux powercap, :mod:`sbprof.measuring.energy.powercap`) and GPU energy
  from NVML (:mod:`sbprof.measuring.energy.nvml`). It returns an
  :class:`~sbprof.record.Energy`: joules per domain and average
  watts, or "not measurable here" with the reason for each missing source.
- :mod:`sbprof.measuring.energy.external`: an external meter's CSV log of
  (timestamp, watts) integrated over a run's window.

Why not codecarbon: where no counter exists it derives energy from the CPU's
TDP and a utilisation guess, a number that was never measured. zeus measures
(it reads the same RAPL files and NVML counter), but its RAPL root cannot be
pointed at a test tree and it pulls in about twenty packages; sbprof reads
powercap itself and NVML through nvidia-ml-py (the module docstrings give
details). Nothing here imports torch.
"""
