"""A clock of the collectives for steps that run without torch.profiler (``sbprof run``'s measured steps).

What is timed, and from when to when:

- DDP's gradient all-reduce, through a DDP communication hook. Where the
  script registers none, sbprof registers, at the DDP module's first
  forward, PyTorch's default hook (``allreduce_hook``: divide the bucket by
  the world size, then all-reduce it: the arithmetic of DDP's built-in path,
  so the gradients are the same to the bit) with the clock in its one
  callback; where
  the script registers its own (``register_comm_hook``), that hook is wrapped
  instead. A span runs from the hook's call (its bucket's gradients are
  ready) to the completion of the future it returns. A built-in C++ hook
  (``_register_builtin_comm_hook``) cannot be wrapped: its all-reduce is not
  timed, and a console line says so.
- Collectives the script calls itself (``torch.distributed.all_reduce``,
  ``broadcast``, ``all_gather``, ``barrier``...): from the call to its
  return, or with ``async_op=True`` to the completion of the work's future.
- Clocks: on gloo (and other CPU backends) the host's ``perf_counter``, read at
  the call and in the future's callback, which gloo's own thread runs when
  the collective ends (so the time a rank waits for the others counts). On
  NCCL the host clock would only see the launch: a CUDA event is recorded on
  the calling stream at the call and one in the future's callback (which runs
  on streams ordered after the collective's kernels); such spans are read
  once their events have completed (:meth:`CommClock.window`).

A step's communication is the union of the spans inside its window
(overlapping buckets count once), as :mod:`sbprof.distributed.comm` does with
the profiler's events.
"""
from __future__ import annotations

import functools
import sys
import time
from collections import deque
from typing import Any, Callable, Deque, List, Tuple

from sbprof.distributed.comm import seconds_in

COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "broadcast", "reduce", "reduce_scatter",
               "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "barrier", "gather", "scatter")
"""The ``torch.distributed`` functions timed when the script calls them (the object collectives call these from
inside ``torch.distributed`` by their module's own names, so they are not counted twice)."""
MAX_SPANS = 100_000


class PendingComm:
    """A step's device-timed collectives (NCCL), read once their events have completed."""

    def __init__(self, spans: List[Tuple[Any, Any]]):
        self.spans = spans

    def ready(self) -> bool:
        return all(end.query() for _, end in self.spans)

    def seconds(self) -> float:
        """The union of the spans on the device's clock (waits for their events)."""
        if not self.spans:
            return 0.0
        anchor = self.spans[0][0]
        anchor.synchronize()
        spans = []
        for start, end in self.spans:
            end.synchronize()
            spans.append((anchor.elapsed_time(start) * 1e3, anchor.elapsed_time(end) * 1e3))  # ms -> us
        spans.sort()
        return seconds_in(spans, (spans[0][0], max(b for _, b in spans)))


class CommClock:
    """Spans of the collectives, installed into this process by :meth:`install` (see the module docstring).

    Example
    -------
    >>> clock = CommClock()
    >>> token = clock.start(); clock.finish(token)
    >>> clock.window(token[0] - 1.0, time.perf_counter() + 1.0) >= 0.0
    True
    """

    def __init__(self) -> None:
        self._host: Deque[Tuple[float, float]] = deque(maxlen=MAX_SPANS)
        self._device: Deque[Tuple[float, Any, Any]] = deque(maxlen=MAX_SPANS)
        self._undo: List[Callable[[], None]] = []
        self.cuda = False  # NCCL: spans on CUDA events
        self._backend_known = False
        self._register: Callable = lambda *args: None  # DDP's own register_comm_hook, once installed
        self._all_reduce: Callable = lambda *args, **kwargs: None  # torch.distributed's own, once installed

    # ------------------------------------------------------------ spans

    def start(self) -> Tuple[float, Any]:
        """A collective is issued now: its token (host time, and a CUDA event on NCCL)."""
        if not self.cuda:
            return time.perf_counter(), None
        import torch

        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return time.perf_counter(), event

    def finish(self, token: Tuple[float, Any]) -> None:
        """The collective issued with ``token`` has completed (called where its completion is known)."""
        issued, event = token
        if event is None:  # a deque's append is atomic: no lock on gloo's thread
            self._host.append((issued, time.perf_counter()))
            return
        import torch

        done = torch.cuda.Event(enable_timing=True)
        done.record()
        self._device.append((issued, event, done))

    def window(self, t0: float, t1: float) -> Any:
        """Communication seconds inside ``[t0, t1]`` (``perf_counter``): a float, or on NCCL a
        :class:`PendingComm` of the collectives issued inside it. Spans ending before ``t0`` are dropped (windows
        come in order)."""
        while self._host and self._host[0][1] < t0:  # only this thread removes; others only append
            self._host.popleft()
        while self._device and self._device[0][0] < t0:
            self._device.popleft()
        # list() copies a deque in one step (the GIL held): another thread's append cannot break the iteration.
        host = [(a * 1e6, b * 1e6) for a, b in list(self._host) if a < t1 and b > t0]
        device = [(s, e) for issued, s, e in list(self._device) if t0 <= issued <= t1]
        if device or self.cuda:
            return PendingComm(device)
        return seconds_in(sorted(host), (t0 * 1e6, t1 * 1e6))

    # ------------------------------------------------------------ install

    def install(self) -> "CommClock":
        """Time DDP's hooks and the ``torch.distributed`` collectives in this process (undone by :meth:`remove`)."""
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        clock = self
        init, register, builtin = DDP.__init__, DDP.register_comm_hook, DDP._register_builtin_comm_hook
        self._register, self._all_reduce = register, dist.all_reduce  # the originals, for the default hook

        @functools.wraps(init)
        def ddp_init(ddp: Any, *args: Any, **kwargs: Any) -> None:
            init(ddp, *args, **kwargs)
            clock._use_backend()
            ddp._sbprof_first = ddp.register_forward_pre_hook(clock._default_hook)

        @functools.wraps(register)
        def register_timed(ddp: Any, state: Any, hook: Callable) -> None:
            ddp._sbprof_script_hook = True
            register(ddp, state, clock.timed_hook(hook))

        @functools.wraps(builtin)
        def register_builtin(ddp: Any, comm_hook_type: Any) -> None:
            ddp._sbprof_script_hook = True
            print(f"sbprof: the script's built-in DDP communication hook ({comm_hook_type}) cannot be wrapped: its "
                  "all-reduce is not timed, and the communication figures leave it out", file=sys.stderr)
            builtin(ddp, comm_hook_type)

        for owner, name, value in ((DDP, "__init__", ddp_init), (DDP, "register_comm_hook", register_timed),
                                   (DDP, "_register_builtin_comm_hook", register_builtin)):
            self._patch(owner, name, value)
        for name in COLLECTIVES:
            function = getattr(dist, name, None)
            if callable(function):
                self._patch(dist, name, self.timed_collective(function))
        return self

    def remove(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo = []

    def _patch(self, owner: Any, name: str, value: Any) -> None:
        original = getattr(owner, name)
        setattr(owner, name, value)
        self._undo.append(lambda: setattr(owner, name, original))

    def _use_backend(self) -> None:
        import torch.distributed as dist

        self._backend_known = dist.is_initialized()
        self.cuda = self._backend_known and dist.get_backend() == "nccl"

    def _default_hook(self, ddp: Any, args: Any) -> None:
        """At a DDP module's first forward: the default all-reduce, timed, unless the script set a hook."""
        ddp._sbprof_first.remove()
        if not getattr(ddp, "_sbprof_script_hook", False):
            self._register(ddp, ddp.process_group, self._allreduce)

    def _allreduce(self, group, bucket):  # type: ignore[no-untyped-def]  # DDP checks a hook's annotations
        """PyTorch's default hook (``default_hooks.allreduce_hook``: the bucket divided by the group's size, then
        all-reduced by sum), with one callback that times it and hands DDP the result: the fewest Python calls on
        gloo's thread."""
        import torch.distributed as dist

        group = group if group is not None else dist.group.WORLD
        tensor = bucket.buffer().div_(group.size())
        token = self.start()
        future = self._all_reduce(tensor, group=group, async_op=True).get_future()

        def done(f: Any) -> Any:
            self.finish(token)
            return f.value()[0]
        return future.then(done)

    def timed_hook(self, hook: Callable) -> Callable:
        """A DDP communication hook timed from its call to the completion of its future."""
        clock = self

        @functools.wraps(hook)
        def timed(state: Any, bucket: Any) -> Any:
            token = clock.start()
            future = hook(state, bucket)

            def done(f: Any) -> Any:
                clock.finish(token)
                return f.value()
            return future.then(done)
        return timed

    def timed_collective(self, function: Callable) -> Callable:
        """A ``torch.distributed`` collective timed to its return, or to its work's completion when asynchronous."""
        clock = self

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not clock._backend_known:
                clock._use_backend()
            token = clock.start()
            work = function(*args, **kwargs)
            if work is None:  # synchronous: done (on NCCL, the calling stream now waits for it)
                clock.finish(token)
                return work
            try:
                work.get_future().then(lambda f: clock.finish(token))
            except (AttributeError, RuntimeError):  # a backend without futures: timed to the call's return
                clock.finish(token)
            return work
        return timed
