"""Per-module attribution of a step's time and memory, forward and backward, without editing the model.

- :class:`ModuleAttribution` (:mod:`sbprof.measuring.modules.attribution`): the hooks, as
  a context manager or through the decorators' ``modules=`` option; light
  (clocks only) or detailed (``record_function`` labels) mode;
- :func:`select_modules`, :func:`default_selection` (:mod:`sbprof.measuring.modules.selection`):
  which modules get rows (name globs, types, a default for speech Conformers);
- :mod:`sbprof.measuring.modules.wrapping`: code around a module's forward, without torch's hooks;
- :mod:`sbprof.measuring.modules.steps`: what the hooks record in one step;
- :mod:`sbprof.measuring.modules.timeline`: boundary times to forward/backward times (pure);
- :class:`ModuleBreakdown`, :class:`ModuleRow` (:mod:`sbprof.record.breakdown`, built by :mod:`sbprof.measuring.modules.result`): the result, plain data;
- :func:`module_memory` (:mod:`sbprof.measuring.modules.memory`): per-module memory from torch's MemTracker.
"""
from sbprof.measuring.modules.attribution import ModuleAttribution
from sbprof.measuring.modules.memory import module_memory
from sbprof.record.breakdown import ModuleBreakdown, ModuleRow
from sbprof.measuring.modules.selection import default_selection, select_modules

__all__ = ["ModuleAttribution", "ModuleBreakdown", "ModuleRow", "default_selection", "module_memory",
           "select_modules"]
