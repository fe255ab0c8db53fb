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
from sbprof.jobs.job import Job, Lazy, schema_keys

JOB = Job("stream", "streaming ASR chunk by chunk: latency percentiles, real-time margin, streams per machine",
          load_config=Lazy("sbprof.stream.config", "load_config"), config_keys=schema_keys("sbprof.stream.config"),
          plan=Lazy("sbprof.stream.plan", "Plan"), analyse=Lazy("sbprof.analysis.stream", "analyse"),
          render=Lazy("sbprof.report.stream", "render"))  # imports matplotlib
JOBS = (JOB,)
"""What the registry lists (a package may hold several jobs, as counts does)."""
