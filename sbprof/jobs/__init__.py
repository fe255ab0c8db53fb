"""Every job's one way to run: the registry, the shared preamble, the plan helpers, the runner and render-only.

- :mod:`sbprof.jobs.registry`: every job as one registration (:class:`~sbprof.jobs.registry.JobEntry`);
- :mod:`sbprof.jobs.preamble`: the configuration keys every job shares, checked one way;
- :mod:`sbprof.jobs.plan`: what a job's plan hands the runner (worker batches, records) and the
  interleaved passes over runs;
- :mod:`sbprof.jobs.runner`: the one runner (lock, reserve, resume, workers, progress, signals);
- :mod:`sbprof.jobs.render`: analysis once, then the job's renderers; ``--render-only``.

Nothing is imported here: ``import sbprof.jobs.registry`` stays light.
"""
