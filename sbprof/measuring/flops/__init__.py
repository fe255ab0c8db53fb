"""FLOPs and MACs of speech models: per operator, per module, forward and backward.

- :func:`count_flops` -> :class:`FlopCount` (totals, module rows, operator
  rows, untracked operators); :class:`FlopCounter` for any code block;
- :data:`FORMULAS` the table operator -> formula, and the conventions
  (:mod:`sbprof.measuring.flops.formulas`);
- per second of audio: :func:`per_audio_second`, :func:`count_interface_flops`;
- against the machine: :func:`measure_cpu_peak`, :func:`gpu_peak`,
  :func:`achieved`.
"""
from __future__ import annotations

from sbprof.measuring.flops.audio import AudioFlops, count_interface_flops, per_audio_second
from sbprof.measuring.flops.counter import FlopCounter, UntrackedOperatorWarning, count_flops
from sbprof.measuring.flops.cost import Cost
from sbprof.measuring.flops.formulas import CONVENTIONS, FORMULAS, NO_FLOPS, formula_for
from sbprof.measuring.flops.peak import Achieved, Peak, achieved, gpu_peak, measure_cpu_peak
from sbprof.record.flops import FlopCount, ModuleFlops, OperatorFlops

__all__ = ["Achieved", "AudioFlops", "CONVENTIONS", "Cost", "FORMULAS", "FlopCount", "FlopCounter", "ModuleFlops",
           "NO_FLOPS", "OperatorFlops", "Peak", "UntrackedOperatorWarning", "achieved", "count_flops",
           "count_interface_flops", "formula_for", "gpu_peak", "measure_cpu_peak", "per_audio_second"]
