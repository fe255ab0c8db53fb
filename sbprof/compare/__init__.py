"""The comparison job (``sbprof compare-models``): models or variants over a varied input size, and budgets.

- :mod:`sbprof.compare.schema` / :mod:`sbprof.compare.config`: the comparison
  YAML (variants, the varied dimension, energy counters);
- :mod:`sbprof.compare.plan` (runner side) and :mod:`sbprof.compare.worker`
  (worker side): every variant measured in fresh worker processes, per
  setting and run, energy windows included;
- :mod:`sbprof.compare.meterlog`: an external power meter's log attached to
  every point;
- :mod:`sbprof.compare.budget`: one model held to a stored baseline (the
  ``sbprof_budget`` pytest fixture).

The series, growth laws, crossovers and the regression gate are statistics
(:mod:`sbprof.analysis.series`, :mod:`sbprof.analysis.comparison`,
:mod:`sbprof.analysis.gate`); the reports are in :mod:`sbprof.report.comparison`.
Nothing is imported here.
"""
