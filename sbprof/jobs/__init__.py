"""Every job's one way to run: what a job is, the shared preamble, the plan helpers, the runner and its reports.

- :mod:`sbprof.jobs.job`: what a job is (:class:`~sbprof.jobs.job.Job`), exported by each job package;
- :mod:`sbprof.registry` (above this package and the job packages, never imported from them): every job
  package listed, ``name -> Job``, :func:`sbprof.run` and ``render_only``;
- :mod:`sbprof.jobs.preamble`: the configuration keys every job shares, checked one way;
- :mod:`sbprof.jobs.plan`: what a job's plan hands the runner (worker batches, records) and the
  interleaved passes over runs;
- :mod:`sbprof.jobs.runner`: the one runner (lock, reserve, resume, workers, progress, signals) and its one
  wiring from a job's checked configuration (``run_config``, for every command and library caller);
- :mod:`sbprof.jobs.outcome`: what a run did, and SIGTERM read as Ctrl-C while it runs;
- :mod:`sbprof.jobs.render`: analysis once, then the job's renderers; ``--render-only``.

Nothing is imported here.
"""
