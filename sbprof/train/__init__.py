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
from sbprof.jobs.job import Job, Lazy, written_report
from sbprof.report.train import render


def _config():  # imports torch
    from sbprof.train import config

    return config


def _plan():
    from sbprof.train.plan import Plan

    return Plan


def _run_rank():
    from sbprof.train.rank import run_rank

    return run_rank


JOB = Job("train", "training-loop profile: step time, memory, FLOPs, per-module breakdown; DDP scale-out",
          load_config=Lazy(lambda: _config().load_config), config_keys=lambda: list(_config().SCHEMA),
          plan=Lazy(_plan), analyse=analyse, render=render, derive=train_figures, show=written_report,
          run_rank=Lazy(_run_rank))
JOBS = (JOB,)
"""What the registry lists (a package may hold several jobs, as counts does)."""
