"""A batch's events file: what the node did, one JSON line each, appended as it happens and read as it comes.

On a Slurm cluster the node and the driver share the output folder: the
node appends each event (the worker's ``result`` with its record, a
``crash``, ``end``...) and syncs it to disk at once, so a record the node
made is never lost, whatever happens to the node or the driver next. The
driver reads the file from where it stopped (reopening it each time: a
network filesystem shows another machine's writes to a file opened after
them), complete lines only: a line cut by a dying node is not an event.

Example
-------
>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "b.events"
>>> log = EventLog(path); log.emit({"event": "result", "index": 0})
>>> tail = EventTail(path); [e["event"] for e in tail.read()], tail.read()
(['result'], [])
>>> with open(path, "a") as f: _ = f.write('{"event": "end"}\\n{"event": "res')
>>> [e["event"] for e in tail.read()], tail.offset == len(path.read_bytes()) - len('{"event": "res')
(['end'], True)
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Set, Union


class EventLog:
    """Appends events to a file, each synced to disk before :meth:`emit` returns."""

    def __init__(self, path: Union[str, Path]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def seal(self) -> None:
        """End a line cut by a node that died while writing it, so the next event starts a line of its own."""
        try:
            with open(self.path, "rb") as f:
                f.seek(-1, os.SEEK_END)
                cut = f.read(1) != b"\n"
        except (FileNotFoundError, OSError):
            return  # no file, or an empty one
        if cut:
            with open(self.path, "ab") as f:
                f.write(b"\n")

    def emit(self, event: Dict[str, Any]) -> None:
        line = (json.dumps(event) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)  # one write of one line: appended whole
            os.fsync(fd)
        finally:
            os.close(fd)


class EventTail:
    """Reads the complete events added to a file since the last read (from ``offset``, in bytes)."""

    def __init__(self, path: Union[str, Path], offset: int = 0):
        self.path = Path(path)
        self.offset = offset

    def read(self) -> List[Dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1  # a last line without its newline is still being written (or was cut)
        events = []
        for line in data[:end].splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue  # a line torn by a node that died while writing it: no event
        self.offset += end
        return events


def done_indices(path: Union[str, Path]) -> Set[int]:
    """The items that already have their record (a result or a crash) in an events file: what a batch started
    again (a requeued job) must not measure a second time.

    Example
    -------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "b.events"
    >>> for e in ({"event": "result", "index": 1}, {"event": "start"}, {"event": "crash", "index": 3}):
    ...     EventLog(path).emit(e)
    >>> sorted(done_indices(path))
    [1, 3]
    """
    return {e["index"] for e in EventTail(path).read() if e.get("event") in ("result", "crash")}
