"""This process's rank file over its life: opened at the first step of any section, closed at exit, on SIGTERM or
by :func:`finish`, then the end barrier and the merge.

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
the ``sbprof merge`` command that does). Another rank ended by an exception
(its peer died) waits :data:`STOPPED_WAIT_S` for the others' ends, so that
torchrun's SIGTERM finds it alive.
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
from pathlib import Path
from typing import Any, Dict, List, Optional, Protocol

from sbprof.distributed.rankfile import RankWriter, rank_file
from sbprof.distributed.world import STORE_PREFIX, World, agree_run_id, backend, connect_store

ENV_MERGE_TIMEOUT = "SBPROF_MERGE_TIMEOUT_S"
ENV_NO_MERGE = "SBPROF_NO_MERGE"
DEFAULT_MERGE_TIMEOUT_S = 300.0
STOPPED_WAIT_S = 5.0
"""After SIGTERM: how long the merging rank waits for the other stopped ranks to close their files; at exit by an
exception, how long a rank other than 0 waits in the end barrier for torchrun's SIGTERM."""
STOPPED_MERGE_S = 15.0
"""After SIGTERM: the merge's deadline (torchrun kills the ranks 30 s after its SIGTERM)."""
_POLL_S = 0.2


class Section(Protocol):
    """What the log uses of a :class:`~sbprof.distributed.recorder.RankSection` (that module imports this one)."""

    profiler: Any
    rows: Dict[str, List[Any]]

    def write_records(self, log: "RankLog") -> None: ...


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
        self.sections: List[Section] = []
        self.closing = False
        self.writing = False  # close() is writing the records: a SIGTERM now waits for the end line
        self.merged = False  # a merge ran or runs (at the end barrier or after SIGTERM)
        self.merging = False  # the end barrier's merge runs now: a SIGTERM waits for it
        self.sigterm_pending = False
        self.last_key: Optional[tuple] = None  # (section, step name) of the last step that ended in this process
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
        if self.writing or self.merging or any(getattr(s.profiler, "stopping", False) for s in self.sections):
            # A profiler is reading its recording, close() is writing the records or the end barrier's merge runs
            # (the SIGTERM came in the middle): finish that first, so the file (or report) is whole, then handle
            # it (stop_finished / close call back).
            self.sigterm_pending = True
            return
        if not self.closing:
            self.close("SIGTERM", barrier=False)
        if not self.merged:
            # Also when this rank had closed at exit (an exception: its peer died) and waits in the end barrier
            # for a rank that never comes: the world is being stopped, merge now.
            self._merge_after_stop()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    def close(self, reason: str, barrier: bool = True, merge: Optional[bool] = None) -> Optional[int]:
        """Write every section's records and the end line; pass the end barrier; rank 0 merges (its exit code)."""
        if self.closing or self.writer.file.closed:
            return None
        self.closing = self.writing = True
        try:
            for section in self.sections:
                section.write_records(self)
            last = max((row.index for s in self.sections for rows in s.rows.values() for row in rows),
                       default=None)
            self.writer.write("end", {"reason": reason, "last_step": last, "t": time.time()})
            self.writer.close()
        finally:
            self.writing = False
        if self.sigterm_pending:
            self.sigterm_pending = False
            self._on_sigterm(signal.SIGTERM, None)
        if not barrier:
            return None
        # A rank other than 0 that ends by an exception most often does so because a peer died (gloo: "connection
        # reset by peer"). It waits briefly for every rank's end, so that torchrun's SIGTERM (sent when the peer
        # died) finds it alive and it merges then. It never merges by itself: rank 0 may be alive, blocked in a
        # collective, and stopped (then merging, its records written) only once this rank has exited.
        failed = reason.startswith("exception") and self.world.rank != 0
        missing = [] if self.store is None else end_barrier(
            self.store, self.run_id, self.world, reason,
            STOPPED_WAIT_S if failed else float(os.environ.get(ENV_MERGE_TIMEOUT, DEFAULT_MERGE_TIMEOUT_S)),
            waiter=self.world.rank if failed else 0)
        merge = os.environ.get(ENV_NO_MERGE) != "1" if merge is None else merge
        if not merge:
            return None
        if self.world.rank != 0:
            if failed and 0 in missing:
                print(f"sbprof: rank {self.world.rank} ended by an exception and rank 0 had not ended "
                      f"{STOPPED_WAIT_S:g} s later; if no rank merges, run: sbprof merge "
                      f"{shlex.quote(str(self.folder))}", file=sys.stderr, flush=True)
            return None
        if missing:
            print(f"sbprof: ranks {missing} did not end within the barrier's timeout: merging without them",
                  file=sys.stderr)
        self.merged = self.merging = True
        try:
            return run_merge(self.folder)
        finally:
            self.merging = False
            if self.sigterm_pending:  # torchrun stopped the world while merging: the report is written, now stop
                self.sigterm_pending = False
                self._on_sigterm(signal.SIGTERM, None)


    def _merge_after_stop(self) -> None:
        """Stopped by SIGTERM (torchrun stopping the world after a rank failed): one stopped rank merges now.

        Within torchrun's grace period (30 s before its SIGKILL): each stopped rank marks its end; the first to
        claim the merge through torchrun's store waits up to :data:`STOPPED_WAIT_S` for the others' marks (a
        dead rank never marks), then runs ``sbprof merge`` with a deadline. When it cannot, it prints the
        command that does.
        """
        if os.environ.get(ENV_NO_MERGE) == "1":
            return
        self.merged = True
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
    >>> from sbprof.distributed.world import from_env
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
    >>> from sbprof.distributed.world import from_env
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
    from sbprof.workers.supervisor import child_env

    try:
        # In its own session: torchrun stops a rank with killpg, which must not end the merge it is running.
        return subprocess.run([sys.executable, "-m", "sbprof", "merge", str(run_folder)], env=child_env(),
                              timeout=timeout_s, start_new_session=True).returncode
    except subprocess.TimeoutExpired:
        return None


def finish(reason: str = "done", merge: Optional[bool] = None) -> Optional[int]:
    """Close this rank's file now (records, end line, barrier; rank 0 merges): the merge's exit code on rank 0."""
    log = RankLog.current
    if log is None:
        return None
    return log.close(reason, merge=merge)
