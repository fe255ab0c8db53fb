"""The merge of one run's rank files, streamed: memory bounded by one rank, however many ranks.

:func:`find_run` says which run folder a command means (a run folder, a
folder holding runs, or the default rank folder); :func:`merge_run` reads its
rank files twice, one at a time (:mod:`sbprof.analysis.distributed`: per-step
figures first, then one row per rank), so its memory is one rank's file plus
a fixed-size row per rank and per step index, and its time grows linearly
with the ranks (``benchmarks/merge_ranks.py`` measures both).

Nothing is mixed silently: files of one run folder must share the run id
and world size, no rank may appear twice or lie outside the world. A rank
whose file has no end line (it died, was killed or hung) keeps every step
it wrote: its figures are rebuilt from its step lines (and the
communication lines of the recordings it finished), and it is listed as
stopped early, with the step where it was last seen. A rank without a file,
or with an empty one, has no figures and is listed as missing.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

from sbprof.analysis.distributed import RankPayload, RankSteps, RunAnalysis, RunSummary, summarise_run
from sbprof.analysis.rank_rows import MissingRank
from sbprof.distributed.rankfile import RankFile, read_rank_file, rank_files
from sbprof.distributed.world import DEFAULT_FOLDER, ENV_FOLDER
from sbprof.base.errors import ConfigError
from sbprof.record import Measurement


def find_run(target: Union[str, Path, None] = None) -> Path:
    """The run folder ``target`` means: itself when it holds rank files, its only run folder when it holds runs.

    Without ``target``: ``$SBPROF_RANK_FOLDER``, else ``./sbprof-ranks``, else the working directory.

    Raises
    ------
    ConfigError
        No rank files there, or several runs (listed, with their world sizes: give one).
    """
    if target is None:
        candidates = [os.environ.get(ENV_FOLDER) or DEFAULT_FOLDER, "."]
        target = next((c for c in candidates if Path(c).is_dir() and (holds_ranks(Path(c)) or runs_in(Path(c)))),
                      candidates[0])
    folder = Path(target)
    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such folder of rank files")
    if holds_ranks(folder):
        return folder
    if not runs_in(folder) and (folder / DEFAULT_FOLDER).is_dir():  # a working directory: read as the default is
        folder = folder / DEFAULT_FOLDER
        if holds_ranks(folder):
            return folder
    runs = runs_in(folder)
    if len(runs) == 1:
        return runs[0]
    if not runs:
        raise ConfigError(f"{folder}: no rank files (rank*.jsonl) in it or in its subfolders")
    listed = ", ".join(f"{r.name} ({len(rank_files(r))} file(s))" for r in runs)
    raise ConfigError(f"{folder} holds {len(runs)} runs ({listed}); merging never mixes runs: give one run's folder")


def holds_ranks(folder: Path) -> bool:
    return bool(rank_files(folder))


def runs_in(folder: Path) -> List[Path]:
    """The run folders directly inside ``folder``, by name (run ids sort by start time)."""
    return sorted(p for p in folder.iterdir() if p.is_dir() and holds_ranks(p))


def rank_records(rank: RankFile) -> Dict[str, Measurement]:
    """A rank file's records by section, each saying how the rank ended (``extra["rank"]["end"]``)."""
    out = {}
    for section, d in rank.records.items():
        try:
            m = Measurement.from_dict(d)
        except ConfigError as exc:  # named by file and line, as a results file's record is
            line = rank.record_lines.get(section)
            raise ConfigError(f"{rank.path}: {f'line {line}: ' if line else ''}the record of {section!r}: {exc}") from None
        m.extra.setdefault("rank", {})["end"] = (rank.end or {}).get("reason", "")
        out[section] = m
    return out


DIED = "no end line: it died, was killed or hung (figures from the steps it wrote)"


def rebuild_records(rank: RankFile) -> List[Measurement]:
    """The records of a rank that never wrote them, from its step lines and communication lines.

    Every reported step it wrote counts; a step whose recording had not been read when the rank died has no
    communication figure (``None``).
    """
    from sbprof.record import Cell

    out = []
    header = rank.header
    world = {k: header.get(k) for k in ("rank", "local_rank", "world_size", "local_world_size", "node_rank", "host",
                                        "run_id", "backend")}
    for section, lines in (rank.steps or {}).items():
        shown = [line for line in lines if line.get("reported", True)]
        if not lines:
            continue
        comm = (rank.comm or {}).get(section, {})
        indices = [int(line.get("index", i)) for i, line in enumerate(shown)]
        utterances = [line.get("utterances") for line in shown]
        # A step line carries its communication where the rank timed it itself (sbprof run); else a comm line.
        steps = RankSteps(section=section, steps=indices,
                          comm_s=[line["comm_s"] if isinstance(line.get("comm_s"), (int, float)) else comm.get(i)
                                  for i, line in zip(indices, shown)],
                          gap_s=[line.get("gap_s") for line in shown],
                          last_step=int(lines[-1].get("index", len(lines) - 1)), end=DIED)
        audio = [line.get("audio_s") for line in shown]
        waits = [line.get("data_wait_s") for line in shown]
        extra = RankPayload(rank=steps, utterances_per_step=_numbers(shown, utterances),
                            audio_s_per_step=_numbers(shown, audio), data_wait_s_per_step=_numbers(shown, waits))
        cuda = [line.get("cuda_s") for line in shown]
        out.append(Measurement(
            label=f"rank {rank.rank}: {section}", cell=Cell(model=section, rank=rank.rank, device="cpu",
                                                            params={"world_size": header.get("world_size")}),
            warmup=len(lines) - len(shown), wall_s=[float(line["wall_s"]) for line in shown],
            cpu_s=[float(line.get("cpu_s", 0.0)) for line in shown],
            cuda_s=[float(c) for c in cuda] if shown and all(isinstance(c, (int, float)) for c in cuda) else None,
            settings={"distributed": world, "step": str(lines[-1].get("name", section)), "rebuilt": True},
            extra=extra.to_dict()))
    return out


def _numbers(shown: List[dict], values: List[object]) -> Optional[List[float]]:
    """Every reported step's figure as a float, or ``None`` when a step has none."""
    return [float(v) for v in values] if shown and all(isinstance(v, (int, float)) for v in values) else None


def _rank_of_name(path: Path) -> Optional[int]:
    digits = path.stem[len("rank"):]
    return int(digits) if digits.isdigit() else None


def _read(path: Path) -> Tuple[Optional[RankFile], Optional[MissingRank]]:
    try:
        return read_rank_file(path), None
    except ConfigError as exc:
        if "empty rank file" not in str(exc) or _rank_of_name(path) is None:
            raise
        return None, MissingRank(_rank_of_name(path), None, "its file is empty: it stopped before its first step "
                                                             "ended")


def _check(first: Dict, rank: RankFile, seen: Dict[int, Path]) -> None:
    for key in ("run_id", "world_size"):
        if rank.header.get(key) != first.get(key):
            raise ConfigError(f"{rank.path} belongs to another run ({key} {rank.header.get(key)!r}, not "
                              f"{first.get(key)!r}): a run folder holds one run's files only")
    if not 0 <= rank.rank < int(first["world_size"]):
        raise ConfigError(f"{rank.path}: rank {rank.rank} outside a world of size {first['world_size']}")
    if rank.rank in seen:
        raise ConfigError(f"rank {rank.rank} appears twice: {seen[rank.rank]} and {rank.path}")
    seen[rank.rank] = rank.path


def merge_run(run_folder: Union[str, Path], gpu_traces: bool = True) -> RunSummary:
    """Merge every rank file of ``run_folder`` (see the module docstring); GPU traces go to HTA when present."""
    run_folder = Path(run_folder)
    paths = rank_files(run_folder)
    if not paths:
        raise ConfigError(f"{run_folder}: no rank files (rank*.jsonl)")
    first: Optional[Dict] = None
    seen: Dict[int, Path] = {}
    ended: List[Path] = []
    missing: List[MissingRank] = []
    analysis: Optional[RunAnalysis] = None
    rebuilt: Dict[Path, List[Measurement]] = {}
    for path in paths:  # pass 1: headers checked, per-step figures of every rank with steps
        rank, empty = _read(path)
        if empty is not None:
            missing.append(empty)
            continue
        first = first or rank.header
        _check(first, rank, seen)
        analysis = analysis or RunAnalysis(int(first["world_size"]))
        if rank.end is None:
            records = rebuild_records(read_rank_file(path, steps=True))
            if not records:
                missing.append(MissingRank(rank.rank, rank.last_seen, "no end line and no step: it died, was "
                                           "killed or hung before its first step ended",
                                           rank.header.get("host", ""), rank.header.get("node_rank")))
                continue
            rebuilt[path] = records
        else:
            ended.append(path)
            records = list(rank_records(rank).values())
        for m in records:
            analysis.add_steps(m)
    if first is None or analysis is None:
        raise ConfigError(f"{run_folder}: every rank file is empty: no rank reached its first step")
    for path in paths:  # pass 2: one row per rank and section
        if path in rebuilt:
            records = rebuilt.pop(path)
        elif path in ended:
            records = list(rank_records(read_rank_file(path)).values())
        else:
            continue
        for m in records:
            analysis.add_rank(m)
    for rank_index in range(analysis.world_size):
        if rank_index not in seen and rank_index not in {m.rank for m in missing}:
            missing.append(MissingRank(rank_index, None, "no rank file: it never ended a step (or wrote elsewhere)"))
    for m in missing:
        analysis.add_missing(m)
    backend = str(first.get("backend", "none"))
    notes, gpu = _gpu(run_folder, backend) if gpu_traces else ([], None)
    return summarise_run(analysis, str(first["run_id"]), backend, str(run_folder), notes, gpu)


def _gpu(run_folder: Path, backend: str) -> Tuple[List[str], Optional[Dict]]:
    """HolisticTraceAnalysis on the run's GPU traces (NCCL); a note saying why not otherwise."""
    traces = run_folder / "traces"
    if backend != "nccl":
        return [f"Communication ({backend}) comes from the ranks' own readings: the profiler's events under the "
                "decorators, the communication clock under sbprof run; HolisticTraceAnalysis is for GPU traces (its "
                "breakdown needs GPU kernels)."], None
    if not traces.is_dir() or not any(traces.glob("*.pt.trace.json*")):
        return ["No per-rank GPU traces in traces/ (profile with on_trace_ready=sbprof.export() for "
                "HolisticTraceAnalysis's temporal breakdown and comm/compute overlap)."], None
    from sbprof.distributed.hta import gpu_breakdown

    try:
        return [], gpu_breakdown(traces)
    except ImportError:
        return ["HolisticTraceAnalysis is not installed (pip install 'sbprof[hta]'): no GPU temporal breakdown."], None
