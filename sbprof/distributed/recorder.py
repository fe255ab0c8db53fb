"""The decorators' rank mode: under torchrun, every profiled target records its steps into this rank's file.

When ``RANK`` and ``WORLD_SIZE`` are set, each profiled target (a decorated
function, a Brain, a module...) gets a :class:`RankSection`. Its profilers
tell it when a step ends (wall and CPU seconds, seconds since the previous
step: data loading and the loop's own work) and when a profiler session
ends; it then reads that session's events for the communication time of each
reported step (:mod:`sbprof.distributed.comm`) and, with ``profile_memory``,
each step's allocator peak. Lines go to this process's rank file
(:mod:`sbprof.distributed.rankfile`) as they come.

The file opens at the first step (the process group exists by then); the
run id is agreed then (:func:`~sbprof.distributed.world.agree_run_id`). The
file is closed, with one record per section and step name and an ``end``
line, at interpreter exit, on SIGTERM (torchrun's way of stopping the other
ranks when one fails), or by :func:`finish`. Closing also passes a barrier
with a timeout through torchrun's store: each rank marks its end; rank 0
waits for every mark (at most ``$SBPROF_MERGE_TIMEOUT_S``, default 300 s),
then runs ``sbprof merge`` on the run folder, which names the ranks that
never ended and where each was last seen. After SIGTERM, the first stopped
rank to claim it merges at once, within torchrun's grace period (or prints
the ``sbprof merge`` command that does).
"""
from __future__ import annotations

import atexit
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from sbprof.distributed.rankfile import RankWriter, rank_file
from sbprof.distributed.world import STORE_PREFIX, World, agree_run_id, backend, connect_store, from_env, rank_folder

ENV_MERGE_TIMEOUT = "SBPROF_MERGE_TIMEOUT_S"
ENV_NO_MERGE = "SBPROF_NO_MERGE"
DEFAULT_MERGE_TIMEOUT_S = 300.0
STOPPED_WAIT_S = 5.0
"""After SIGTERM: how long the merging rank waits for the other stopped ranks to close their files."""
STOPPED_MERGE_S = 15.0
"""After SIGTERM: the merge's deadline (torchrun kills the ranks 30 s after its SIGTERM)."""
_POLL_S = 0.2


@dataclass
class StepRow:
    """One step of a section as it ended."""

    index: int
    wall_s: float
    cpu_s: float
    gap_s: Optional[float]
    reported: bool
    cuda_s: Optional[float] = None
    comm_s: Optional[float] = None
    allocated_bytes: Optional[int] = None


def record_key(section: str, step: str) -> str:
    """A section's records are per step name: ``CTCBrain/train``; a function's steps bear its name.

    Example
    -------
    >>> record_key("CTCBrain", "train"), record_key("train_step", "train_step")
    ('CTCBrain/train', 'train_step')
    """
    return section if step == section else f"{section}/{step}"


class RankLog:
    """This process's rank file, opened at the first step of any section (one per process)."""

    current: Optional["RankLog"] = None
    _lock = threading.Lock()

    def __init__(self, world: World, folder: Path):
        self.world = world
        self.store = connect_store(world)
        self.run_id = agree_run_id(world, self.store)
        self.folder = folder / self.run_id
        self.backend = backend()
        self.sections: List["RankSection"] = []
        self.closing = False
        self.sigterm_pending = False
        self.writer = RankWriter(rank_file(self.folder, world.rank), {
            "run_id": self.run_id, **world.to_dict(), "backend": self.backend, "pid": os.getpid(),
            "started_unix": time.time()})
        atexit.register(self._at_exit)
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, self._on_sigterm)

    @classmethod
    def get(cls, world: World, folder: Path) -> "RankLog":
        """This process's log, opened now if needed; once closed (:func:`finish`), later steps are not written."""
        with cls._lock:
            if cls.current is None:
                cls.current = cls(world, folder)
            return cls.current

    def _at_exit(self) -> None:
        # An uncaught exception ends the interpreter too (sys.last_value): that is no normal end.
        error = getattr(sys, "last_value", None)
        code = self.close("exit" if error is None else f"exception: {type(error).__name__}: {error}"[:200])
        if error is None and code not in (None, 0):
            # The merge failed (2) or found the run incomplete (1): this rank's exit code says so.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        if any(getattr(s.profiler, "stopping", False) for s in self.sections):
            # A profiler is reading its recording (the SIGTERM came in the middle): finish that first, so its
            # communication is written, then close (RankSection.stop_finished calls back).
            self.sigterm_pending = True
            return
        if not self.closing:
            self.close("SIGTERM", barrier=False)
            self._merge_after_stop()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    def close(self, reason: str, barrier: bool = True, merge: Optional[bool] = None) -> Optional[int]:
        """Write every section's records and the end line; pass the end barrier; rank 0 merges (its exit code)."""
        if self.closing or self.writer.file.closed:
            return None
        self.closing = True
        for section in self.sections:
            section.write_records(self)
        last = max((row.index for s in self.sections for rows in s.rows.values() for row in rows), default=None)
        self.writer.write("end", {"reason": reason, "last_step": last, "t": time.time()})
        self.writer.close()
        if not barrier:
            return None
        missing = [] if self.store is None else end_barrier(
            self.store, self.run_id, self.world, reason,
            float(os.environ.get(ENV_MERGE_TIMEOUT, DEFAULT_MERGE_TIMEOUT_S)))
        merge = os.environ.get(ENV_NO_MERGE) != "1" if merge is None else merge
        if self.world.rank != 0 or not merge:
            return None
        if missing:
            print(f"sbprof: ranks {missing} did not end within the barrier's timeout: merging without them",
                  file=sys.stderr)
        return run_merge(self.folder)


    def _merge_after_stop(self) -> None:
        """Stopped by SIGTERM (torchrun stopping the world after a rank failed): one stopped rank merges now.

        Within torchrun's grace period (30 s before its SIGKILL): each stopped rank marks its end; the first to
        claim the merge through torchrun's store waits up to :data:`STOPPED_WAIT_S` for the others' marks (a
        dead rank never marks), then runs ``sbprof merge`` with a deadline. When it cannot, it prints the
        command that does.
        """
        if os.environ.get(ENV_NO_MERGE) == "1":
            return
        command = f"sbprof merge {shlex.quote(str(self.folder))}"
        try:
            if self.store is not None:
                if not claim_merge(self.store, self.run_id, self.world):
                    return  # another stopped rank merges
                end_barrier(self.store, self.run_id, self.world, "SIGTERM", STOPPED_WAIT_S, waiter=self.world.rank)
            print(f"sbprof: rank {self.world.rank} was stopped (SIGTERM): merging what every rank wrote "
                  f"({command})", file=sys.stderr, flush=True)
            code = run_merge(self.folder, timeout_s=STOPPED_MERGE_S)
        except Exception:  # noqa: BLE001 - never a traceback while torchrun stops the world
            code = None
        if code not in (0, 1):
            print(f"sbprof: no report was written for this stopped run; for it, run: {command}", file=sys.stderr,
                  flush=True)


def claim_merge(store: Any, run_id: str, world: World) -> bool:
    """Whether this rank is the first of a stopped run to claim its merge (the store's atomic compare-set).

    Example
    -------
    >>> import torch.distributed as dist
    >>> store = dist.HashStore()
    >>> [claim_merge(store, "r", from_env({"RANK": str(r), "WORLD_SIZE": "2"})) for r in (1, 0)]
    [True, False]
    """
    try:
        mine = str(world.rank)
        return store.compare_set(f"{STORE_PREFIX}{run_id}/merger", "", mine).decode() == mine
    except (RuntimeError, ValueError, OSError):
        return True


def end_barrier(store: Any, run_id: str, world: World, reason: str, timeout_s: float,
                waiter: int = 0) -> List[int]:
    """Mark this rank's end in torchrun's store; rank ``waiter`` (0) waits for every rank's mark, at most ``timeout_s``.

    Returns the ranks the waiter did not see end (empty elsewhere, and when the store is gone: torchrun stopping).

    Example
    -------
    >>> import torch.distributed as dist
    >>> store = dist.HashStore()
    >>> world = from_env({"RANK": "0", "WORLD_SIZE": "2"})
    >>> end_barrier(store, "r", world, "done", timeout_s=0.2)  # rank 1 never ends: not waited for forever
    [1]
    """
    keys = [f"{STORE_PREFIX}{run_id}/end/{r}" for r in range(world.world_size)]
    try:
        store.set(keys[world.rank], reason)
        if world.rank != waiter:
            return []
        deadline = time.monotonic() + timeout_s
        while not store.check(keys) and time.monotonic() < deadline:
            time.sleep(_POLL_S)
        return [r for r, key in enumerate(keys) if not store.check([key])]
    except (RuntimeError, ValueError, OSError):
        return []


def run_merge(run_folder: Path, timeout_s: Optional[float] = None) -> Optional[int]:
    """``sbprof merge RUN_FOLDER`` in a fresh process (the measuring process never renders); its exit code
    (``None`` past ``timeout_s``)."""
    from sbprof.workers.supervisor import SBPROF_ROOT

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SBPROF_ROOT, env.get("PYTHONPATH")) if p)
    try:
        return subprocess.run([sys.executable, "-m", "sbprof", "merge", str(run_folder)], env=env,
                              timeout=timeout_s).returncode
    except subprocess.TimeoutExpired:
        return None


class RankSection:
    """One profiled target's steps on this rank (see the module docstring).

    ``key`` names it in every rank's file (targets are numbered in the order
    they are profiled, the same on every rank); a job may set ``cell``
    (coordinates of its records), ``step_figures`` (per step index, e.g.
    utterances) and ``memory`` (a :class:`~sbprof.record.MemoryPeak`) before
    the file closes.
    """

    def __init__(self, world: World, key: str, folder: Optional[str]):
        self.world = world
        self.key = key
        self.folder = rank_folder(folder)
        self.rows: Dict[str, List[StepRow]] = {}
        self.pending: Dict[str, List[StepRow]] = {}
        self.last_end: Dict[str, float] = {}
        self.profiler: Any = None
        self.cell: Dict[str, Any] = {}
        self.step_figures: Dict[str, List[float]] = {}
        self.memory: Any = None
        self.items: Dict[str, Dict[int, int]] = {}  # per step name and index: utterances in the batch (a Brain's)
        self.log: Optional[RankLog] = None

    def attach(self, prof: Any) -> None:
        """The target's profiler from now on (an unscheduled function makes one per call; the last one is kept)."""
        prof.rank_section = self
        self.profiler = prof

    def step_ended(self, prof: Any, name: str, start: float, wall_s: float, cpu_s: float,
                   cuda_s: Optional[float] = None, index: Optional[int] = None, reported: Optional[bool] = None,
                   items: Optional[int] = None) -> None:
        """A counted step ended (``start``: its ``perf_counter`` start; ``cuda_s``: between CUDA events, on a GPU;
        ``reported``: whether its stage's schedule reports it; ``items``: utterances in its batch); a line goes out
        at once."""
        if self.log is None:
            self.log = RankLog.get(self.world, self.folder)
            self.log.sections.append(self)
        rows = self.rows.setdefault(name, [])
        previous = self.last_end.get(name)
        if reported is None:
            reported = not prof.has_schedule or prof.schedule.reports(prof.step_num)
        row = StepRow(len(rows), wall_s, cpu_s, None if previous is None else max(0.0, start - previous), reported,
                      cuda_s)
        rows.append(row)
        if items is not None:
            self.items.setdefault(name, {})[row.index] = items
        if reported and not prof.timing_only:
            self.pending.setdefault(name, []).append(row)
        line = {"section": record_key(self.key, name), "name": name, "index": row.index, "wall_s": wall_s,
                "cpu_s": cpu_s, "gap_s": row.gap_s, "reported": reported, "t": time.time()}
        if cuda_s is not None:
            line["cuda_s"] = cuda_s
        if items is not None:
            line["utterances"] = items
        self.log.writer.write("step", line)
        # The next step's "between" starts once this bookkeeping is done: sbprof's own time is not the user's.
        self.last_end[name] = time.perf_counter()

    def stop_finished(self) -> None:
        """A profiler finished reading its recording: a SIGTERM that came meanwhile is handled now."""
        log = self.log
        if log is not None and log.sigterm_pending:
            log.sigterm_pending = False
            log._on_sigterm(signal.SIGTERM, None)

    def session_ended(self, prof: Any) -> None:
        """Read the profiler's new sessions: communication (and allocator peak) of each reported step in them."""
        from sbprof.distributed.comm import comm_per_window
        from sbprof.events import peak_per_window

        views = prof.sessions()
        for view in views[prof.rank_views_read:]:
            for name, waiting in self.pending.items():
                windows = [w for w in view.windows if w.step == name][:len(waiting)]
                if not windows:
                    continue
                spans = [(view.to_us(w.start_ns), view.to_us(w.end_ns)) for w in windows]
                comm = comm_per_window(view.function_events, spans)
                peaks = peak_per_window(view.memory, windows) if prof.profile_memory else [None] * len(windows)
                for row, seconds, peak in zip(waiting, comm, peaks):
                    row.comm_s = seconds
                    row.allocated_bytes = None if peak is None else max(peak)
                done = waiting[:len(windows)]
                del waiting[:len(windows)]
                if self.log is not None:
                    self.log.writer.write("comm", {"section": record_key(self.key, name),
                                                   "steps": {str(r.index): r.comm_s for r in done}})
        prof.rank_views_read = len(views)

    def write_records(self, log: RankLog) -> None:
        """Stop this target's profilers (their last sessions are read) and write one record per step name."""
        if self.profiler is not None and self.profiler.running:
            self.profiler.stop()
        for name, rows in self.rows.items():
            log.writer.write("record", {"section": record_key(self.key, name),
                                        "measurement": self.measurement(log, name, rows).to_dict()})

    def measurement(self, log: RankLog, name: str, rows: List[StepRow]) -> Any:
        """The record of one step name on this rank: its reported steps, their communication, gaps and memory."""
        import torch

        from sbprof.env import collect_env, load_average
        from sbprof.record import Cell, Measurement

        shown = [r for r in rows if r.reported]
        timing_only = self.profiler is None or self.profiler.timing_only
        device = f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_initialized() else "cpu"
        world = {**self.world.to_dict(), "run_id": log.run_id, "backend": log.backend}
        extra: Dict[str, Any] = {"rank": {
            "section": record_key(self.key, name), "steps": [r.index for r in shown], "comm_s": None if timing_only else [r.comm_s for r in shown],
            "gap_s": [r.gap_s for r in shown], "last_step": rows[-1].index,
            "allocated_peak_bytes": [r.allocated_bytes for r in shown]}}
        for figure, per_step in self.step_figures.items():
            extra[figure] = [per_step[r.index] for r in shown if r.index < len(per_step)]
        items = self.items.get(name, {})
        if shown and "utterances_per_step" not in extra and all(r.index in items for r in shown):
            extra["utterances_per_step"] = [float(items[r.index]) for r in shown]
        cell = {"model": record_key(self.key, name), "device": device, "threads": torch.get_num_threads(),
                **self.cell}
        cell["params"] = {"world_size": self.world.world_size, **cell.get("params", {})}
        return Measurement(label=f"rank {self.world.rank}: {record_key(self.key, name)}",
                           cell=Cell(rank=self.world.rank, **cell), warmup=len(rows) - len(shown),
                           wall_s=[r.wall_s for r in shown], cpu_s=[r.cpu_s for r in shown],
                           cuda_s=[r.cuda_s for r in shown] if shown and shown[0].cuda_s is not None else None,
                           memory=self.memory if self.memory is not None else process_peak(device),
                           settings={"distributed": world, "step": name, "timing_only": timing_only,
                                     "schedule": repr(self.profiler.schedule) if self.profiler is not None
                                     and self.profiler.has_schedule else None, "load_1min": load_average()},
                           env=collect_env(), extra=extra)


def process_peak(device: str) -> Any:
    """This process's memory high-water mark since it started: resident (VmHWM) or the CUDA allocator's peak."""
    from sbprof.memory import _read_status_kib
    from sbprof.record import MemoryPeak

    if device.startswith("cuda"):
        import torch

        return MemoryPeak(peak_cuda_bytes=torch.cuda.max_memory_allocated(device))
    try:
        return MemoryPeak(peak_rss_bytes=_read_status_kib("VmHWM"), rss_method="vmhwm_process")
    except (OSError, KeyError):
        return None


_KEYS: Dict[str, int] = {}


def new_section(name: str, folder: Optional[str]) -> Optional[RankSection]:
    """A section for a newly profiled target under torchrun (numbered ``name#2``... when a name repeats); else ``None``.

    Example
    -------
    >>> new_section("f", None) is None or os.environ.get("RANK") is not None
    True
    """
    world = from_env()
    if world is None:
        return None
    _KEYS[name] = _KEYS.get(name, 0) + 1
    return RankSection(world, name if _KEYS[name] == 1 else f"{name}#{_KEYS[name]}", folder)


def finish(reason: str = "done", merge: Optional[bool] = None) -> Optional[int]:
    """Close this rank's file now (records, end line, barrier; rank 0 merges): the merge's exit code on rank 0."""
    log = RankLog.current
    if log is None:
        return None
    return log.close(reason, merge=merge)
