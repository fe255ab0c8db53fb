"""Transducer-loss benchmark (job ``transducer``): every RNN-T loss implementation on realistic shapes.

A validated config (:mod:`~sbprof.transducer.config`) names a shape source
(:mod:`~sbprof.transducer.shapes`), batching modes
(:mod:`~sbprof.transducer.batching`) and backends
(:mod:`~sbprof.transducer.backends`, the plain-PyTorch reference among them);
:mod:`~sbprof.transducer.plan` checks every backend against the reference
(:mod:`~sbprof.transducer.check`) and measures each in worker processes
(:mod:`~sbprof.transducer.worker`, possibly under another Python
interpreter) run by the one runner (:mod:`sbprof.jobs.runner`), which saves
the records in ``results.json``; :mod:`sbprof.analysis.transducer` and
:mod:`sbprof.report.transducer` turn them into the report.
``sbprof transducer transducer.yaml`` runs it all.

This package file imports nothing but :mod:`sbprof.jobs.job` (the standard
library) on purpose: the worker runs it under other interpreters (e.g.
Python 3.9 + torch 1.13 + k2) that lack sbprof's dependencies. Every part of
:data:`JOB` is imported when called.
"""
from sbprof.jobs.job import Job, Lazy, schema_keys, written_report

JOB = Job("transducer", "RNN-T loss backends: agreement, step time and memory side by side",
          load_config=Lazy("sbprof.transducer.config", "load_config"),
          config_keys=schema_keys("sbprof.transducer.config"), plan=Lazy("sbprof.transducer.plan", "Plan"),
          analyse=Lazy("sbprof.analysis.transducer", "analyse"), render=Lazy("sbprof.report.transducer", "render"),
          show=written_report)
JOBS = (JOB,)
"""What the registry lists (a package may hold several jobs, as counts does)."""
