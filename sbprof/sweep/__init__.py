"""The profiling sweep job (``sbprof profile``): a pretrained model over audio lengths x batch sizes x settings.

- :mod:`~sbprof.sweep.schema` / :mod:`~sbprof.sweep.validate` /
  :mod:`~sbprof.sweep.config`: the YAML, checked into a ``SweepConfig``;
- :mod:`~sbprof.sweep.plan`: the grid's cells per setting, in runs, for the one runner;
- :mod:`~sbprof.sweep.worker`: a worker process that measures (or profiles) one setting's cells.

The grid and its triangle rule are in :mod:`sbprof.analysis.grid`, the input audio in
:mod:`sbprof.models.audio`; the analysis in :mod:`sbprof.analysis.sweep`, the
renderers in :mod:`sbprof.report.sweep`. :data:`JOB` names them all; its
heavy parts are imported when called.

The one name that does not line up: the job is ``profile`` (``sbprof
profile``, ``results.json``'s ``job``) but its package is ``sweep``, because
``sbprof.profile`` is the public SpeechBrain-style decorator
(:mod:`sbprof.decorators`) and a package ``sbprof.profile`` would shadow it.
"""
from sbprof.analysis.figures import cell_figures
from sbprof.jobs.job import Job, Lazy, schema_keys

JOB = Job("profile", "profiling sweep of a pretrained model: RTF and memory tables",
          load_config=Lazy("sbprof.sweep.config", "load_config"), config_keys=schema_keys("sbprof.sweep.config"),
          plan=Lazy("sbprof.sweep.plan", "Plan"), analyse=Lazy("sbprof.analysis.sweep", "analyse"),
          render=Lazy("sbprof.report.sweep", "render"),  # imports matplotlib
          derive=cell_figures, summarise=Lazy("sbprof.analysis.sweep", "summary_block"))
JOBS = (JOB,)
"""What the registry lists (a package may hold several jobs, as counts does)."""
