"""The streaming-latency job (``sbprof stream``): a StreamingASR model chunk by chunk under real-time pacing.

- :mod:`~sbprof.stream.config`: ``stream.yaml``, checked into a ``StreamConfig``;
- :mod:`~sbprof.stream.plan`: per setting, the offline call, the latency grid and the capacity search;
- :mod:`~sbprof.stream.session`: live streams served by one process (arrivals, one queue, the clock);
- :mod:`~sbprof.stream.capacity`: the bisection on stream count;
- :mod:`~sbprof.stream.worker`: the worker process that runs the real chunk loop.

The model's streaming specifics are in :mod:`sbprof.models.streaming`, the
analysis in :mod:`sbprof.analysis.stream`, the renderers in
:mod:`sbprof.report.stream`. :data:`JOB` names them all; its heavy parts are
imported when called.
"""
from sbprof.jobs.job import Job, Lazy


def _config():  # imports torch and SpeechBrain
    from sbprof.stream import config

    return config


def _analyse():
    from sbprof.analysis.stream import analyse

    return analyse


def _render():  # imports matplotlib
    from sbprof.report.stream import render

    return render


def _plan():
    from sbprof.stream.plan import Plan

    return Plan


JOB = Job("stream", "streaming ASR chunk by chunk: latency percentiles, real-time margin, streams per machine",
          load_config=Lazy(lambda: _config().load_config), config_keys=lambda: list(_config().SCHEMA),
          plan=Lazy(_plan), analyse=Lazy(_analyse), render=Lazy(_render))
JOBS = (JOB,)
"""What the registry lists (a package may hold several jobs, as counts does)."""
