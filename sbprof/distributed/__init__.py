"""Distributed training under torchrun: one file per rank, and one merged report of every rank.

torchrun and ``torch.distributed`` are the engine; this package writes no
launcher, rendezvous or transport of its own:

- :mod:`~sbprof.distributed.world`: who this process is (``RANK``,
  ``LOCAL_RANK``, ``WORLD_SIZE``, node, host, backend), the run's id agreed
  through torchrun's own store, and the folder rank files go to;
- :mod:`~sbprof.distributed.comm`: communication time read from the
  profiler's events (collectives on the CPU, NCCL kernels on a GPU);
- :mod:`~sbprof.distributed.comm_clock`: communication timed without the
  profiler (a DDP comm hook, the collectives), for ``sbprof run``'s steps;
- :mod:`~sbprof.distributed.machine_load`: the machine's busy CPU and the
  rank's own over its reported steps (was the machine crowded?);
- :mod:`~sbprof.distributed.rankfile`: the per-rank file (JSON lines, written
  as steps end, so a rank that dies still says where it was);
- :mod:`~sbprof.distributed.recorder`: the decorators' rank mode (a section
  per profiled target, its steps written as they end);
- :mod:`~sbprof.distributed.ranklog`: this rank's file over its life (closed
  at exit or SIGTERM; rank 0 merges after a barrier with a timeout);
- :mod:`~sbprof.distributed.merge`: the streaming merge (two passes, one
  rank in memory at a time) behind ``sbprof merge``;
- :mod:`~sbprof.distributed.launch`: the torchrun command sbprof runs for a
  ``world_sizes`` study (``python -m torch.distributed.run``);
- :mod:`~sbprof.distributed.hta`: HolisticTraceAnalysis on GPU traces (optional).
"""
