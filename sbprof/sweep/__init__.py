"""The profiling sweep job (``sbprof profile``): a pretrained model over audio lengths x batch sizes x settings.

- :mod:`~sbprof.sweep.schema` / :mod:`~sbprof.sweep.validate` /
  :mod:`~sbprof.sweep.config`: the YAML, checked into a ``SweepConfig``;
- :mod:`~sbprof.sweep.plan`: the grid's cells per setting, in runs, for the one runner;
- :mod:`~sbprof.sweep.worker`: a worker process that measures (or profiles) one setting's cells.

The grid and its triangle rule are in :mod:`sbprof.analysis.grid`, the input audio in
:mod:`sbprof.models.audio`; the analysis in :mod:`sbprof.analysis.sweep`, the
renderers in :mod:`sbprof.report.sweep`. Nothing is imported here.
"""
