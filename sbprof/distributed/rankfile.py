"""One rank's results file: JSON lines, appended and flushed as the run goes, read back one line at a time.

``<run folder>/rank00003.jsonl`` (the rank, five digits, so files sort by
rank) holds, one JSON object per line:

- ``{"header": {...}}``: the run id, rank, local rank, world size, node rank,
  host, backend, process id and start time;
- ``{"step": {...}}``: each step as it ends (section, name, index, wall and
  CPU seconds, seconds since the previous step, whether it is reported), so
  the last one says where a rank that died was last seen;
- ``{"comm": {...}}``: communication seconds of the reported steps of one
  profiler session, once the session is read;
- ``{"record": {...}}``: a section's whole :class:`~sbprof.record.Measurement`
  (the last one of a section wins);
- ``{"end": {...}}``: why the rank stopped (``exit``, ``SIGTERM``...). A file
  without one belongs to a rank that died or is still running.

Each line is written whole and flushed, so a rank killed with SIGKILL loses
at most the line it was writing (a torn last line is ignored on reading).
The reader keeps only the header, each section's last record, the last step
line and the end: one rank's file never needs more memory than its records.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from sbprof.base.errors import ConfigError

FORMAT = "sbprof-rank"
VERSION = 1
GLOB = "rank*.jsonl"
LINE_KINDS = ("header", "step", "comm", "record", "end")


def rank_file(folder: Union[str, Path], rank: int) -> Path:
    """The file of ``rank`` in a run folder.

    Example
    -------
    >>> rank_file("/tmp/run", 3).name
    'rank00003.jsonl'
    """
    return Path(folder) / f"rank{rank:05d}.jsonl"


class RankWriter:
    """Appends lines to one rank's new file (an existing file is another process's: refused).

    Example
    -------
    >>> import tempfile
    >>> path = rank_file(tempfile.mkdtemp(), 0)
    >>> w = RankWriter(path, {"run_id": "r", "rank": 0, "world_size": 1})
    >>> w.write("end", {"reason": "exit"}); w.close()
    >>> read_rank_file(path).end
    {'reason': 'exit'}
    """

    def __init__(self, path: Path, header: Dict[str, Any]):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.file = open(path, "x")
        except FileExistsError:
            raise ConfigError(f"{path} already exists: another process wrote rank {header.get('rank')} of run "
                              f"{header.get('run_id')!r}; give each run its own id (or folder)") from None
        self.path = path
        self.write("header", {"format": FORMAT, "version": VERSION, **header})

    def write(self, kind: str, content: Dict[str, Any]) -> None:
        """One whole line, flushed to the kernel (it survives the process being killed)."""
        if self.file.closed:
            return
        self.file.write(json.dumps({kind: content}) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


@dataclass
class RankFile:
    """What the merge keeps of one rank's file (see the module docstring)."""

    path: Path
    header: Dict[str, Any]
    records: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    last_step: Optional[Dict[str, Any]] = None
    end: Optional[Dict[str, Any]] = None
    torn: bool = False
    steps: Optional[Dict[str, List[Dict[str, Any]]]] = None  # with ``steps=True``: every step line, by section
    comm: Optional[Dict[str, Dict[int, float]]] = None  # with ``steps=True``: communication of each reported step
    record_lines: Dict[str, int] = field(default_factory=dict)  # section -> the line of its record (for messages)

    @property
    def rank(self) -> int:
        return int(self.header["rank"])

    @property
    def last_seen(self) -> Optional[int]:
        """The index of the last step this rank wrote (``None`` before its first step ended)."""
        return None if self.last_step is None else int(self.last_step["index"])


_SKIPPED = (b'{"comm": ',)
_STEP = b'{"step": '
MAX_SECONDS = 1e9  # as a results file's figures (sbprof.record.check): more is damage, never a measurement


def _parse(raw: bytes) -> Optional[Dict[str, Any]]:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) and len(obj) == 1 else None


def _whole_step(raw: bytes) -> bool:
    """Whether a step line reads as written whole, without parsing it: one flat object in an object, ended.

    A line cut short and continued by the next one (a torn write in the middle of a file) has more braces, or
    does not end as a step line ends; such a line is parsed, and refused if it is broken.
    """
    return raw.endswith(b"}}\n") and raw.count(b"{") == 2 and raw.count(b"}") == 2


def _seconds(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= MAX_SECONDS


def _check_line(kind: str, content: Any, where: str) -> None:
    """Refuse a line whose content a hand edit or damage broke, naming the file and line (``where``)."""
    if not isinstance(content, dict):
        raise ConfigError(f"{where}: a {kind} line must hold a mapping, got {type(content).__name__}")
    if kind == "header":
        for key, ok in (("rank", lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**31),
                        ("world_size", lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v < 2**31),
                        ("run_id", lambda v: isinstance(v, str))):
            if not ok(content.get(key)):
                raise ConfigError(f"{where}: the header's {key} is {content.get(key)!r}, not a "
                                  f"{'run id' if key == 'run_id' else 'count from ' + ('0' if key == 'rank' else '1')}")
    elif kind == "record":
        if not isinstance(content.get("section"), str) or not isinstance(content.get("measurement"), dict):
            raise ConfigError(f"{where}: a record line holds a section (a name) and a measurement (a mapping)")
    elif kind == "step":
        index = content.get("index")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ConfigError(f"{where}: a step's index must be an integer >= 0, got {index!r}")
        for key in ("wall_s", "cpu_s", "gap_s", "audio_s", "cuda_s"):
            if content.get(key) is not None and not _seconds(content[key]):
                raise ConfigError(f"{where}: a step's {key} must be a number of seconds from 0 to 1e9, got "
                                  f"{content[key]!r}")
        if not _seconds(content.get("wall_s")):
            raise ConfigError(f"{where}: a step line holds its wall_s, seconds from 0 to 1e9")
        if content.get("utterances") is not None and not (_seconds(content["utterances"])):
            raise ConfigError(f"{where}: a step's utterances must be a count >= 0, got {content['utterances']!r}")


def read_rank_file(path: Union[str, Path], steps: bool = False) -> RankFile:
    """Read one rank file line by line (see the module docstring).

    Step lines are only skimmed (the last whole one says where the rank was last seen) and communication
    lines skipped: the records hold the figures, so reading costs little more than the records themselves.
    With ``steps=True`` every step and communication line is kept too (:attr:`RankFile.steps`,
    :attr:`RankFile.comm`): the figures of a rank that died before writing its records. Every line read is
    checked for sense (a negative step time, a header's world size...), and a line broken anywhere but at
    the end (where a kill tears it) is refused: one line naming the file and the line.

    Raises
    ------
    ConfigError
        Not a rank file (no header, another format, a newer version), or a broken line other than a torn last one.
    """
    path = Path(path)
    keep = steps
    out: Optional[RankFile] = None
    steps: List[Tuple[int, bytes]] = []  # type: ignore[no-redef]  # the last two step lines (the last may be torn)
    all_steps: Dict[str, List[Dict[str, Any]]] = {}
    comm: Dict[str, Dict[int, float]] = {}
    with open_regular(path) as f:
        lines = iter(enumerate(f, 1))
        for number, raw in lines:
            if raw.startswith(_STEP) and out is not None and (_whole_step(raw) or not raw.endswith(b"\n")):
                steps = steps[-1:] + [(number, raw)]
                if keep:
                    parsed = _parse(raw)
                    if parsed is not None and isinstance(parsed.get("step"), dict):
                        _check_line("step", parsed["step"], f"{path}: line {number}")
                        all_steps.setdefault(str(parsed["step"].get("section")), []).append(parsed["step"])
                continue
            if raw.startswith(_SKIPPED) and out is not None:
                if keep:
                    parsed = _parse(raw)
                    content = parsed.get("comm") if parsed is not None else None
                    if isinstance(content, dict) and isinstance(content.get("steps"), dict):
                        comm.setdefault(str(content.get("section")), {}).update(
                            {int(k): v for k, v in content["steps"].items() if str(k).isdigit()})
                continue
            obj = _parse(raw)
            if obj is None:
                if not raw.endswith(b"\n") and next(lines, None) is None:  # the last line, torn by a kill
                    if out is not None:
                        out.torn = True
                    continue
                raise ConfigError(f"{path}: line {number} is not a rank-file line (cut short, or edited)")
            (kind, content), = obj.items()
            where = f"{path}: line {number}"
            if out is None:
                if kind != "header" or not isinstance(content, dict) or content.get("format") != FORMAT:
                    raise ConfigError(f"{path}: not an sbprof rank file (its first line is no {FORMAT} header)")
                version = content.get("version", 0)
                if not isinstance(version, int) or isinstance(version, bool):
                    raise ConfigError(f"{where}: rank file version {version!r} is not a version number")
                if version > VERSION:
                    raise ConfigError(f"{path}: written by a newer sbprof (rank file version "
                                      f"{content.get('version')}); this sbprof reads version {VERSION}")
                _check_line("header", content, where)
                out = RankFile(path, content)
            elif kind in ("record", "end", "step"):
                _check_line(kind, content, where)
                if kind == "record":
                    out.records[content["section"]] = content["measurement"]
                    out.record_lines[content["section"]] = number
                elif kind == "end":
                    out.end = content
                else:  # a step line that was not skimmed (its section's name holds a brace): read here
                    steps = steps[-1:] + [(number, raw)]
                    if keep:
                        all_steps.setdefault(str(content.get("section")), []).append(content)
    if out is None:
        raise ConfigError(f"{path}: empty rank file (the rank stopped before its first step ended)")
    for number, raw in reversed(steps):
        parsed = _parse(raw)
        if parsed is not None and "step" in parsed:
            _check_line("step", parsed["step"], f"{path}: line {number}")
            out.last_step = parsed["step"]
            break
    out.torn = out.torn or (bool(steps) and _parse(steps[-1][1]) is None)
    if keep:
        out.steps, out.comm = all_steps, comm
    return out


def open_regular(path: Path) -> Any:
    """``path`` opened for reading in binary, refused in one line unless it is a regular file.

    Raises
    ------
    ConfigError
        A symlink loop, a missing file, a folder, a FIFO or a device: bad input, named.
    """
    import os
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == 40:  # ELOOP
            raise ConfigError(f"{path}: a symbolic link loop, not a rank file") from None
        raise ConfigError(f"{path}: cannot read this rank file ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        raise ConfigError(f"{path}: not a regular file (a folder, FIFO or device), so not a rank file")
    try:
        return open(path, "rb")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read this rank file ({exc.strerror or exc})") from None


def rank_files(run_folder: Union[str, Path]) -> List[Path]:
    """The rank files of a run folder, sorted by rank (a link that leads nowhere counts: reading it says why)."""
    return sorted(Path(run_folder).glob(GLOB))
