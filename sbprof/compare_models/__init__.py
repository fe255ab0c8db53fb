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
from sbprof.jobs.job import Job, Lazy


def _config():  # imports torch and SpeechBrain
    from sbprof.compare_models import config

    return config


def _analyse():
    from sbprof.analysis.compare_models import analyse

    return analyse


def _render():  # imports matplotlib
    from sbprof.report.compare_models import render

    return render


def _plan():
    from sbprof.compare_models.plan import Plan

    return Plan


JOB = Job("compare-models", "models or variants over a varied size: latency, RTFx, memory, energy, plots",
          load_config=Lazy(lambda: _config().load_config), config_keys=lambda: list(_config().SCHEMA),
          plan=Lazy(_plan), analyse=Lazy(_analyse), render=Lazy(_render), derive=cell_figures, noun="point")
JOBS = (JOB,)
"""What the registry lists (a package may hold several jobs, as counts does)."""
