"""The count jobs (``sbprof flops``, ``sbprof params``, ``sbprof modules``): one model, counted in a worker.

- :mod:`sbprof.counts.command`: the command line and the options as a
  configuration (also :func:`sbprof.run`'s, from a mapping);
- :mod:`sbprof.counts.target`: the model the options name, checked in
  the parent (a local model, a pretrained-interface folder, a HyperPyYAML
  module) and the job's config;
- :mod:`sbprof.counts.plan`: one cell for the one runner;
- :mod:`sbprof.counts.worker`: builds the model and counts FLOPs, parameters
  or per-module time (:mod:`sbprof.measuring.flops`, :mod:`sbprof.measuring.params`,
  :mod:`sbprof.measuring.modules`) into one record.

The analysis is :mod:`sbprof.analysis.counts`, the reports
:mod:`sbprof.report.counts`. :data:`JOBS` holds the three jobs, one per command.
"""
from sbprof.counts.command import JOBS

__all__ = ["JOBS"]
