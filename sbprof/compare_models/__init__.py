"""The comparison job (``sbprof compare-models``): models or variants over a varied input size, and budgets.

- :mod:`sbprof.compare_models.schema` / :mod:`sbprof.compare_models.config`: the comparison
  YAML (variants, the varied dimension, energy counters);
- :mod:`sbprof.compare_models.plan` (runner side) and :mod:`sbprof.compare_models.worker`
  (worker side): every variant measured in fresh worker processes, per
  setting and run, energy windows included;
- :mod:`sbprof.compare_models.meterlog`: an external power meter's log attached to
  every point;
- :mod:`sbprof.compare_models.budget`: one model held to a stored baseline (the
  ``sbprof_budget`` pytest fixture).

The series, growth laws, crossovers and the regression gate are statistics
(:mod:`sbprof.analysis.series`, :mod:`sbprof.analysis.compare_models`,
:mod:`sbprof.analysis.gate`); the reports are in :mod:`sbprof.report.compare_models`.
:data:`JOB` names them all; its heavy parts are imported when called.
"""
from sbprof.analysis.figures import cell_figures
from sbprof.jobs.job import Job, Lazy, schema_keys

JOB = Job("compare-models", "models or variants over a varied size: latency, RTFx, memory, energy, plots",
          load_config=Lazy("sbprof.compare_models.config", "load_config"),
          config_keys=schema_keys("sbprof.compare_models.config"), plan=Lazy("sbprof.compare_models.plan", "Plan"),
          analyse=Lazy("sbprof.analysis.compare_models", "analyse"),
          render=Lazy("sbprof.report.compare_models", "render"),  # imports matplotlib
          derive=cell_figures, noun="point")
JOBS = (JOB,)
"""What the registry lists (a package may hold several jobs, as counts does)."""
