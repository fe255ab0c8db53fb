"""The analysis work of a sweep's run of 120 records: per checkpoint, and over the run, with the analysis counted.

Builds 120 sweep records (24 grid cells x 5 runs, from the saved fixture
``tests/data/results_4810748/profile.json``'s first record, its batch times
scaled by the cell's audio and batch size), then replays what the runner
does as they arrive, 24 a batch (one run of every cell per worker batch),
saved one by one: the analysis it calls and the time it takes (CPU time of
this process, which a busy machine does not stretch), and the time of one
checkpoint over all 120. Works on this tree and on an older one that
analysed at every record's save and again for the reports (``summary_block(results)``),
to print both sides of issue 41: run it under each tree's ``PYTHONPATH``.

Run: ``python benchmarks/sweep_analysis_time.py [--repeat 3]``
"""
from __future__ import annotations

import argparse
import copy
import inspect
import json
import random
import time
from pathlib import Path
from typing import Callable, List

from sbprof.analysis import sweep
from sbprof.record.results import Results

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "data" / "results_4810748" / "profile.json"
AUDIO, BATCHES, RUNS = (0.5, 1, 2, 4, 8, 16), (1, 2, 4, 8), 5


def records() -> List[dict]:
    """120 records of one model on one setting: every (audio, batch) cell measured in 5 runs, a little noise."""
    data = json.loads(FIXTURE.read_text())
    template, rng, out = data["records"][0], random.Random(0), []
    base = template["wall_s"][0] / (template["cell"]["audio_s"] * template["cell"]["batch_size"])
    for run in range(RUNS):
        for audio in AUDIO:
            for batch in BATCHES:
                r = copy.deepcopy(template)
                r["cell"].update(audio_s=audio, batch_size=batch, run=run)
                r["label"] = f"{audio}s x{batch} run {run}"
                r["audio_seconds"] = audio * batch
                r["wall_s"] = [base * audio * batch * rng.uniform(0.95, 1.05) for _ in range(5)]
                r["cpu_s"] = list(r["wall_s"])
                r.pop("derived", None)
                out.append(r)
    return out


def results_of(data: dict, raw: List[dict]) -> Results:
    return Results.from_dict({**data, "records": raw, "summary": None}, "benchmark")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="replays of the run; the fastest is printed")
    args = parser.parse_args()
    data = {k: v for k, v in json.loads(FIXTURE.read_text()).items() if k != "summary"}
    raw = records()
    once_per_checkpoint = "summary" in inspect.signature(sweep.summary_block).parameters
    calls = [0]

    def analyse(results: Results):
        calls[0] += 1
        return sweep.analyse(results)

    def checkpoint(results: Results) -> None:
        if once_per_checkpoint:  # one analysis: the summary block and the reports from it
            sweep.summary_block(analyse(results))
        else:  # the reports' analysis, then the summary block's own and its verdicts' (at the save)
            analyse(results)
            record_saved(results)

    def record_saved(results: Results) -> None:
        if not once_per_checkpoint:  # every save wrote a summary block computed afresh
            analyse(results)
            sweep.summary_block(results)

    def timed(work: Callable[[], None]) -> float:
        best = float("inf")
        for _ in range(args.repeat):
            calls[0] = 0
            start = time.process_time()
            work()
            best = min(best, time.process_time() - start)
        return best

    saved = [results_of(data, raw[:i]) for i in range(1, len(raw) + 1)]  # the file after each save, read once

    def run() -> None:
        for i, so_far in enumerate(saved, 1):
            record_saved(so_far)
            if i % (len(AUDIO) * len(BATCHES)) == 0:  # a worker batch (one run of every cell) ends
                checkpoint(so_far)

    whole = saved[-1]
    one = timed(lambda: checkpoint(whole))
    per_checkpoint = calls[0]
    total = timed(run)
    tree = "analysis once per checkpoint" if once_per_checkpoint else "analysis at every save and per render"
    print(f"{tree}: {len(raw)} records, {len(raw) // (len(AUDIO) * len(BATCHES))} batches")
    print(f"one checkpoint over {len(raw)} records: {per_checkpoint} analysis call(s), {1000 * one:.0f} ms CPU")
    print(f"the whole run (records saved one by one): {calls[0]} analysis call(s), {1000 * total:.0f} ms CPU")


if __name__ == "__main__":
    main()
