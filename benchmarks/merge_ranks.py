"""Time and peak memory of merging a distributed run's rank files, as the number of ranks grows.

Writes synthetic runs (:func:`write_run`: every rank's file as torchrun
ranks write them, ``steps`` reported steps each, eight ranks per host, one
straggler) with 64 to 1,024 ranks, then merges each with
:func:`sbprof.distributed.merge.merge_run` and prints the merge's wall time,
its peak of Python memory (``tracemalloc``, in a second merge: what the merge holds at once),
the bytes read and the time per rank. The merge reads every file twice, one
at a time, keeping a fixed-size row per rank and per step index, so time
should grow linearly with the ranks and memory by one row per rank, not by
one rank's samples.

Run: ``python benchmarks/merge_ranks.py [--ranks 64 256 512 1024] [--steps 200]``
"""
from __future__ import annotations

import argparse
import math
import random
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import List

from sbprof.distributed.merge import merge_run
from sbprof.distributed.rankfile import RankWriter, rank_file
from sbprof.record import Cell, Measurement, MemoryPeak

RANKS_PER_HOST = 8


def write_run(folder: Path, ranks: int, steps: int, seed: int = 0, straggler: int = 1,
              straggler_s: float = 0.05, backend: str = "gloo") -> Path:
    """A synthetic run folder: ``ranks`` complete rank files; rank ``straggler`` is ``straggler_s`` slower per step.

    At step k the straggler works ``0.2 x (1 + 0.02 sin k) + straggler_s`` seconds, then all-reduces for 0.02 s;
    every other rank works 0.196-0.2 s and waits inside the all-reduce until the straggler is done, so all ranks'
    steps last as long as the straggler's.
    """
    run = folder / f"synthetic-{ranks}"
    rng = random.Random(seed)
    for r in range(ranks):
        host = f"node{r // RANKS_PER_HOST:04d}"
        world = {"run_id": run.name, "rank": r, "local_rank": r % RANKS_PER_HOST, "world_size": ranks,
                 "local_world_size": RANKS_PER_HOST, "node_rank": r // RANKS_PER_HOST, "host": host,
                 "backend": backend}
        writer = RankWriter(rank_file(run, r), world)
        walls, comms, gaps = [], [], []
        for i in range(steps):
            wall = 0.2 * (1 + 0.02 * math.sin(i)) + straggler_s + 0.02
            work = wall - 0.02 if r == straggler else 0.2 * rng.uniform(0.98, 1.0)
            walls.append(wall)
            comms.append(wall - work)
            gaps.append(0.001)
            writer.write("step", {"section": "train", "name": "train", "index": i, "wall_s": wall, "cpu_s": wall,
                                  "gap_s": 0.001, "reported": True, "t": 0.0})
        record = Measurement(
            label=f"rank {r}: train", cell=Cell(model="train", rank=r, params={"world_size": ranks}), wall_s=walls,
            cpu_s=walls, memory=MemoryPeak(peak_rss_bytes=2 * 10**9 + r), settings={"distributed": world},
            extra={"rank": {"section": "train", "steps": list(range(steps)), "comm_s": comms, "gap_s": gaps,
                            "last_step": steps - 1}, "utterances_per_step": [8.0] * steps})
        writer.write("record", {"section": "train", "measurement": record.to_dict()})
        writer.write("end", {"reason": "exit", "last_step": steps - 1})
        writer.close()
    return run


def measure(run: Path) -> dict:
    """Wall time of one merge, then its Python peak memory in a second merge (tracing slows it down)."""
    start = time.perf_counter()
    summary = merge_run(run)
    wall = time.perf_counter() - start
    tracemalloc.start()
    merge_run(run)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"wall_s": wall, "peak_bytes": peak, "summary": summary,
            "bytes": sum(p.stat().st_size for p in run.glob("rank*.jsonl"))}


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[64, 256, 512, 1024])
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args(argv)
    print("| ranks | rank files, MB | merge wall s | s per rank | peak Python memory, MB | per rank, KB |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for ranks in args.ranks:
            run = write_run(Path(tmp), ranks, args.steps)
            m = measure(run)
            section = m["summary"].sections[0]
            assert section.slowest.rank == 1 and len(section.rows) == ranks
            print(f"| {ranks} | {m['bytes'] / 1e6:.1f} | {m['wall_s']:.2f} | {m['wall_s'] / ranks * 1e3:.2f} ms | "
                  f"{m['peak_bytes'] / 1e6:.2f} | {m['peak_bytes'] / ranks / 1e3:.1f} |", flush=True)


if __name__ == "__main__":
    main()
