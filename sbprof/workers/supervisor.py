"""Run a job's items in fresh worker processes and survive their deaths.

Any job (a sweep setting, a transducer-loss backend, a comparison variant)
uses the same supervisor: it starts ``PYTHON -m MODULE`` (any interpreter,
so a backend can run beside an older torch), sends the job on standard
input, follows the worker's events (see :mod:`sbprof.workers.protocol`) and
hands each result to the caller as it comes, so the caller can save it at
once. A worker that dies inside an item (segfault, OOM killer) has that item
reported as crashed with its exit status and the last line of its log, and a
fresh worker takes the remaining items.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Set, Tuple

from sbprof.base.errors import ConfigError, MeasurementError

# The folder holding the sbprof package: another interpreter finds sbprof there.
SBPROF_ROOT = str(Path(__file__).resolve().parents[2])


def child_env(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The environment of a process sbprof starts (a worker, torchrun's ranks, a merge): this one's, with ``extra``,
    and a ``PYTHONPATH`` that leads with the folder holding this sbprof, so the process imports this sbprof
    whatever its interpreter or working directory.

    Example
    -------
    >>> env = child_env({"SBPROF_X": "1"})
    >>> env["SBPROF_X"], env["PYTHONPATH"].split(os.pathsep)[0] == SBPROF_ROOT
    ('1', True)
    """
    env = dict(os.environ, **(extra or {}))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SBPROF_ROOT, env.get("PYTHONPATH")) if p)
    return env


SETUP_TIMEOUT_MIN_S = 120.0
"""The least time a worker gets to set up before it counts as hung, whatever the cells' ``timeout_s``."""


def exit_text(returncode: int) -> str:
    """``killed by signal SIGKILL`` or ``exit code 3``.

    Example
    -------
    >>> exit_text(-9), exit_text(3)
    ('killed by signal SIGKILL', 'exit code 3')
    """
    if returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


def last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


@dataclass
class WorkerJob:
    """What to run and where.

    Arguments
    ---------
    module : str
        The worker module, run as ``python -m module``.
    payload : dict
        The job (JSON); the supervisor adds ``indices`` and ``parent_pid``.
    n_items : int
        Items of the job; item ``i`` is the worker's index ``i``.
    name : str
        Names the worker in its log and messages.
    log_path : Path
        The worker's standard output and error go there (appended).
    python : str
        The interpreter (default: this one).
    env : dict
        Environment variables set for the worker.
    """

    module: str
    payload: Dict[str, Any]
    n_items: int
    name: str
    log_path: Path
    python: str = sys.executable
    env: Dict[str, str] = field(default_factory=dict)


OnResult = Callable[[int, Dict[str, Any]], None]
OnCrash = Callable[[int, str], None]


class Supervisor:
    """Runs a :class:`WorkerJob` to completion, a fresh worker after each crash.

    Arguments
    ---------
    job : WorkerJob
    on_result : callable
        ``on_result(index, payload)`` for each finished item, in order.
    on_crash : callable
        ``on_crash(index, message)`` for an item whose worker died in it, or hung in it.
    on_loaded : callable, optional
        Called with the worker's ``loaded`` event, each time a worker is ready.
    timeout_s : float, optional
        A worker silent for longer inside one item is stopped: the item is
        reported as hung, and a fresh worker goes on.
    setup_timeout_s : float, optional
        The same while the worker sets up (imports, loads the model), which may
        take far longer than one cell, more so on a loaded machine; default
        ``max(timeout_s, SETUP_TIMEOUT_MIN_S)``. Silent past it, the batch fails.
    on_note : callable, optional
        Told, in one line, when a worker died between items and a fresh one took over.
    """

    def __init__(self, job: WorkerJob, on_result: OnResult, on_crash: OnCrash,
                 on_loaded: Optional[Callable[[Dict[str, Any]], None]] = None, timeout_s: Optional[float] = None,
                 on_note: Optional[Callable[[str], None]] = None, setup_timeout_s: Optional[float] = None):
        self.job = job
        self.on_result = on_result
        self.on_crash = on_crash
        self.on_loaded = on_loaded
        self.timeout_s = timeout_s
        if setup_timeout_s is None and timeout_s is not None:
            setup_timeout_s = max(timeout_s, SETUP_TIMEOUT_MIN_S)
        self.setup_timeout_s = setup_timeout_s
        self.on_note = on_note

    def run(self) -> None:
        remaining = list(range(self.job.n_items))
        while remaining:
            remaining = self._run_worker(remaining)

    def _run_worker(self, indices: List[int]) -> List[int]:
        """One worker over ``indices``; returns the indices it did not get to."""
        job = {**self.job.payload, "indices": indices, "parent_pid": os.getpid()}
        read_fd, write_fd = os.pipe()
        proc: Optional[subprocess.Popen] = None
        try:
            try:
                proc = self._spawn(write_fd, len(indices))
            finally:
                os.close(write_fd)  # the worker holds its own copy: EOF comes when it exits
            try:
                proc.stdin.write(json.dumps(job))
                proc.stdin.close()
            except BrokenPipeError:
                pass  # it died at once; its exit status tells
            started, finished, fatal, hung = self._read_events(read_fd)
            if hung:
                proc.kill()
            returncode = proc.wait()
        except BaseException:
            # Interrupted (Ctrl-C) or failing here: never leave the worker running.
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
            raise
        finally:
            os.close(read_fd)
        if fatal is not None:
            kind, message = fatal
            if kind == "config":
                raise ConfigError(message)
            raise MeasurementError(f"{self.job.name}: {message} (worker log: {self.job.log_path})")
        between_items = started is None or started in finished
        if not between_items:
            if hung:
                message = (f"no result within {self.timeout_s:g} s: the worker was stopped (hung in this item, "
                           f"or far slower than the timeout allows)")
            else:
                detail = last_line(self.job.log_path)
                message = f"worker process died ({exit_text(returncode)}) in this item"
                message = f"{message}; last log line: {detail}" if detail else message
            self.on_crash(started, message)
            finished.add(started)
        elif hung and started is None:
            raise MeasurementError(f"{self.job.name}: no sign of life within {self.setup_timeout_s:g} s while setting up; "
                                   f"the worker was stopped (worker log: {self.job.log_path})")
        elif not finished:
            # No progress at all: respawning would loop forever.
            raise MeasurementError(f"{self.job.name}: the worker stopped ({exit_text(returncode)}) before "
                                   f"finishing any item; see {self.job.log_path}")
        left = [i for i in indices if i not in finished]
        if left and self.on_note is not None and between_items:
            why = f"was silent for {self.timeout_s:g} s" if hung else f"died ({exit_text(returncode)})"
            self.on_note(f"{self.job.name}: the worker process {why} between items; a fresh worker took the "
                         f"{len(left)} remaining item(s)")
        return left

    def _spawn(self, write_fd: int, n: int) -> subprocess.Popen:
        self.job.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = child_env(self.job.env)
        with open(self.job.log_path, "a") as log:
            log.write(f"--- {self.job.name}: {n} item(s)\n")
            log.flush()
            try:
                return subprocess.Popen(
                    [self.job.python, "-m", self.job.module, str(write_fd)], stdin=subprocess.PIPE, stdout=log,
                    stderr=log, pass_fds=(write_fd,), env=env, text=True)
            except OSError as exc:
                raise ConfigError(f"{self.job.name}: cannot start {self.job.python!r}: {exc.strerror}") from None

    def _read_events(self, fd: int) -> Tuple[Optional[int], Set[int], Optional[Tuple[str, str]], bool]:
        """Follow the worker's JSON lines: (last started item, finished items, fatal (kind, message), hung)."""
        started: Optional[int] = None
        finished: Set[int] = set()
        self._limit = self.setup_timeout_s
        for line in self._lines(fd):
            if line is None:
                return started, finished, None, True
            event = json.loads(line)
            kind = event["event"]
            if kind == "fatal":
                return started, finished, (event.get("kind", "load"), event["message"]), False
            if kind == "loaded":
                self._limit = self.timeout_s
                if self.on_loaded is not None:
                    self.on_loaded(event)
            elif kind == "start":
                started = event["index"]
            elif kind == "result":
                self.on_result(event["index"], event["payload"])
                finished.add(event["index"])
        return started, finished, None, False

    def _lines(self, fd: int) -> Iterator[Optional[str]]:
        """Complete lines from the pipe as they come; ``None`` once the worker was silent past the timeout.

        A last line without its newline means the worker died while writing it: it is dropped (a crash).
        """
        buffer = b""
        while True:
            ready, _, _ = select.select([fd], [], [], self._limit)
            if not ready:
                yield None
                return
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                yield line.decode()
