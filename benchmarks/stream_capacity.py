"""Streams per machine of a cheap and a costly streaming model: ``sbprof stream`` against an outside simulation.

- **cheap**: the tests' fake ``StreamingASR`` (``tests/helpers/fake_streaming.py``) at a known 2 ms (a spin on the
  wall clock) per 100 ms chunk, over a 1 s utterance;
- **costly**: sbprof's local ``streaming_asr`` at chunk 16 (639 ms), left context 2, on the shipped recording
  (5.8 s).

Per model, an outside loop (SpeechBrain's own API on a plain copy of the model loaded with ``from_hparams``, no
sbprof in the loop) times every call of several sessions of the utterance, each on a fresh context, before and
after the sbprof run, so the outside timings meet the machine's load as sbprof's run does; the simulation then
serves the same arrivals with each call number's median cost, and, for a range, with each call's cost drawn from
all the calls timed (the load's spikes at the rate the outside loop met them). For the cheap model, the known cost
alone (a quiet core) is printed too.

The simulation is ``tests/helpers/queue_simulation.py``: one server, first come first served, no time of its own
between calls, written from ``docs/stream.md``'s description alone. sbprof runs as a subprocess (the real job,
one thread, spread traffic). Printed per model: sbprof's streams per machine [range over repeated probes], the
server's thread's wait for a core at capacity (the load it was found under), the server's own time per chunk,
the simulation's capacity [range], and the machine's 1-minute load.

Run: ``python benchmarks/stream_capacity.py [--sessions 3] [--boundary-probes 3] [--only cheap|costly]``
(``--boundary-probes 0`` leaves the key out, for a checkout that predates it).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from helpers.fake_streaming import write_fake_model  # noqa: E402  (the tests' helpers, on the path just above)
from helpers.queue_simulation import simulated_capacity  # noqa: E402


def sbprof_capacity(folder: Path, model: Dict[str, Any], streaming: Dict[str, Any], capacity: Dict[str, Any]) -> Any:
    """``sbprof stream`` on one capacity search, in a subprocess; its capacity row."""
    from sbprof.analysis.stream import analyse
    from sbprof.results import load_results

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "stream.yaml"
    tree = {"model": model, "streaming": streaming, "capacity": capacity, "offline": False, "devices": "cpu",
            "cpu_threads": 1, "warmup": 2, "measured": 1, "repeats": {"runs": 1}, "seed": 0,
            "output_folder": str(folder / "out")}
    path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in tree.items()))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, "-m", "sbprof", "stream", str(path), "--noprogressbar"], check=True, env=env,
                   stdout=subprocess.DEVNULL, cwd=folder)  # not the checkout's root: PYTHONPATH names sbprof
    return analyse(load_results(folder / "out")).settings[0].capacity


def load(source: str, cls: Any) -> Any:
    """A plain copy of the model, loaded by SpeechBrain's ``from_hparams`` (no sbprof wrapper)."""
    with tempfile.TemporaryDirectory() as tmp:
        return cls.from_hparams(source=source, savedir=tmp)


def outside_costs(asr: Any, wav: Any, chunk_size: int, left: int, sessions: int) -> Tuple[List[List[float]], int, int]:
    """Each call's seconds in ``sessions`` sessions of ``wav``, one fresh context each (its chunks, the last one
    short, then the flush chunks), timed by a loop of SpeechBrain's own API; the samples per chunk and the flush
    chunks."""
    import torch
    from speechbrain.utils.dynamic_chunk_training import DynChunkTrainConfig

    config = DynChunkTrainConfig(chunk_size, left)
    samples = asr.get_chunk_size_frames(config)
    extractor = getattr(asr.hparams, "fea_streaming_extractor", None)
    flush = extractor.get_recommended_final_chunk_count(samples) if extractor is not None else 1
    chunks = [wav[f:f + samples].unsqueeze(0) for f in range(0, wav.shape[0], samples)]
    chunks += [torch.zeros(1, samples)] * flush
    out = []
    for _ in range(sessions + 1):  # the first one warms the model up, unkept
        context, times = asr.make_streaming_context(config), []
        for chunk in chunks:
            t0 = time.perf_counter()
            asr.transcribe_chunk(context, chunk)
            times.append(time.perf_counter() - t0)
        out.append(times)
    return out[1:], samples, flush


def simulated(sessions: List[List[float]], samples: int, length: int, flush: int, max_streams: int,
              seeds: int = 5) -> Tuple[int, int, int]:
    """The simulation's capacity, each call costing the median of that call number over the outside sessions, and
    the range when each call's cost is drawn from every call the outside loop timed (``seeds`` draws): the load's
    spikes at the rate the outside loop met them."""
    median = [statistics.median(s[k] for s in sessions) for k in range(len(sessions[0]))]
    pool = [t for s in sessions for t in s]

    def capacity(cost: Callable[[int], float]) -> int:
        return simulated_capacity(max_streams, math.ceil(length / samples), samples / 16000, cost, length / 16000,
                                  flush)

    drawn = []
    for seed in range(seeds):
        rng = random.Random(seed)
        drawn.append(capacity(lambda k: rng.choice(pool)))
    return capacity(lambda k: median[min(k, len(median) - 1)]), min(drawn), max(drawn)


def show(name: str, cap: Any, simulated: int, low: int, high: int, sim_note: str) -> None:
    span = getattr(cap, "capacity_low", None)
    found = f"{cap.capacity:g}" + ("" if span is None else f" [{span:g}, {cap.capacity_high:g}]")
    wait = getattr(cap, "waited_share", None)
    own = getattr(cap, "own_us", None)
    print(f"{name}: sbprof {found} streams (wait for a core at capacity "
          f"{'n/a' if wait is None else f'{100 * wait:.0f} %'}, server's own time per chunk "
          f"{'n/a' if own is None else f'{own:.1f} µs'}); outside simulation {simulated} [{low}, {high}] "
          f"({sim_note}); probes: {[(p.streams, p.passed) for p in cap.probes]}")


def compare(name: str, folder: Path, model: Dict[str, Any], streaming: Dict[str, Any], capacity: Dict[str, Any],
            asr: Any, wav: Any, sessions: int) -> None:
    """sbprof's capacity between two outside timings of the same calls, and the simulation's from those."""
    chunk, left = capacity["chunk_size"], capacity["left_context_chunks"]
    before, samples, flush = outside_costs(asr, wav, chunk, left, sessions)
    cap = sbprof_capacity(folder, model, streaming, capacity)
    timed = before + outside_costs(asr, wav, chunk, left, sessions)[0]
    median_call = statistics.median(t for s in timed for t in s)
    show(name, cap, *simulated(timed, samples, wav.shape[0], flush, capacity["max_streams"]),
         f"median call {1e3 * median_call:.2f} ms over {len(timed)} outside sessions; the range over 5 draws of "
         "each call's cost from all the calls timed")
    print(f"load now: {os.getloadavg()[0]:.1f}")


def main() -> None:
    import torch
    from speechbrain.inference.ASR import StreamingASR

    from sbprof.base.yamlconfig import shipped_example
    from sbprof.models.audio import load_example
    from sbprof.models.build import build_local_model

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--boundary-probes", type=int, default=3)
    parser.add_argument("--only", choices=("cheap", "costly"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    extra = {"boundary_probes": args.boundary_probes} if args.boundary_probes else {}
    print(f"load before: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "cheap"):
            from helpers.fake_streaming import FakeStreamingASR

            folder = Path(tmp) / "cheap"
            fake = write_fake_model(folder / "fake", compute_s=0.002, frame_samples=200, final_chunks=0)
            print("cheap: the known cost alone would give", simulated_capacity(64, 10, 0.1, lambda k: 0.002),
                  "streams")
            compare("cheap (fake, 2 ms per 100 ms chunk)", folder,
                    {"source": str(fake), "type": "helpers.fake_streaming.FakeStreamingASR"},
                    {"chunk_sizes": [8], "left_context_chunks": [2], "audio": None, "audio_s": 1.0},
                    {"chunk_size": 8, "left_context_chunks": 2, "max_streams": 64, **extra},
                    load(str(fake), FakeStreamingASR), torch.randn(16000), args.sessions * 10)
        if args.only in (None, "costly"):
            compare("costly (streaming_asr, chunk 16, left 2)", Path(tmp) / "costly",
                    {"source": "streaming_asr", "type": "StreamingASR"},
                    {"chunk_sizes": [16], "left_context_chunks": [2], "audio": "example"},
                    {"chunk_size": 16, "left_context_chunks": 2, "max_streams": 16, **extra},
                    load(str(build_local_model("streaming_asr")), StreamingASR),
                    load_example(shipped_example(), 16000), args.sessions)


if __name__ == "__main__":
    main()
