"""The training-profile job (``sbprof train``): real SpeechBrain training loops, profiled by one decorator.

- :mod:`sbprof.train.config`: ``train_profile.yaml`` -> :class:`~sbprof.train.config.TrainConfig`;
- :mod:`sbprof.train.models`: the Conformer CTC and transducer modules (SpeechBrain layers);
- :mod:`sbprof.train.data`: LibriSpeech-shaped mock-up batches;
- :mod:`sbprof.train.brains`: the training code (``Brain`` subclasses, nothing about profiling);
- :mod:`sbprof.train.plan`: each (variant x setting) a cell, in runs, for the one runner;
- :mod:`sbprof.train.worker`: one decorator on the Brain, then memory, FLOPs, parameters, traces, in a worker;
- :mod:`sbprof.train.rank`: one rank of the job under torchrun.

The figures and the analysis are :mod:`sbprof.analysis.train`, the report
:mod:`sbprof.report.train`. :data:`JOB` names them all; the parts that import
torch are imported when called.
"""
from sbprof.analysis.train import analyse, train_figures
from sbprof.jobs.job import Job, Lazy, schema_keys, written_report
from sbprof.report.train import render

JOB = Job("train", "training-loop profile: step time, memory, FLOPs, per-module breakdown; DDP scale-out",
          load_config=Lazy("sbprof.train.config", "load_config"), config_keys=schema_keys("sbprof.train.config"),
          plan=Lazy("sbprof.train.plan", "Plan"), analyse=analyse, render=render, derive=train_figures,
          show=written_report, run_rank=Lazy("sbprof.train.rank", "run_rank"))
JOBS = (JOB,)
"""What the registry lists (a package may hold several jobs, as counts does)."""
