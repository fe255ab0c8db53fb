"""The count jobs (``sbprof flops``, ``sbprof params``, ``sbprof modules``): one model, counted in a worker.

- :mod:`sbprof.counts.target`: the model the command line names, checked in
  the parent (a local model, a pretrained-interface folder, a HyperPyYAML
  module) and the job's config;
- :mod:`sbprof.counts.plan`: one cell for the one runner;
- :mod:`sbprof.counts.worker`: builds the model and counts FLOPs, parameters
  or per-module time (:mod:`sbprof.measuring.flops`, :mod:`sbprof.measuring.params`,
  :mod:`sbprof.measuring.modules`) into one record.

The command line is :mod:`sbprof.cli.counts`; the reports
:mod:`sbprof.report.counts`. Nothing is imported here.
"""
