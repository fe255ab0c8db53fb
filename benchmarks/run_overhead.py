"""What ``sbprof run`` costs a training loop: while it records, and outside its window (``--continue``).

One plain PyTorch loop (an MLP of 8 x Linear(512, 512) + ReLU, batch 64, SGD,
one thread) is run in fresh processes, four ways, in interleaved rounds (the
order of the arms rotates every round, so drift hits every arm alike):

- ``raw``: the script itself starts ``torch.profiler.profile(activities=[CPU])``
  (the settings ``sbprof run`` records with) at its first measured step and
  times each step with ``perf_counter`` (first model call to the end of
  ``Optimizer.step``, the same span ``sbprof run`` calls a step);
- ``sbprof``: ``python -m sbprof run --warmup W --measured M`` on the same script,
  unprofiled by itself: the step times of its ``results.json``;
- ``plain``: the script alone, its own clock, steps after ``--skip``;
- ``continue``: ``sbprof run --continue --warmup 1 --measured 2``: the script's own
  clock on the same steps after ``--skip``, long past the recorded window, with
  the hooks still installed.

Processes differ by a few per cent from one another on this machine, more
than the 1 % bar, so the hooks outside the window are also measured in one
process (``--blocks``): the same loop in alternating blocks of 20 steps, with
``sbprof run``'s hooks installed and past their window (as ``--continue``
leaves them) and with them removed; per pair of blocks, the ratio of median
CPU step times.

Per round, ``sbprof / raw`` (recording overhead; the bar is 1.05) and
``continue / plain`` (hooks outside the window; the bar is 1.01) of the
median step times, in wall time and in process CPU time (on a machine
shared with other work, CPU time is the steadier clock: other processes
stretch wall time, not this process's own CPU time); printed: each
ratio's median over rounds and its IQR.

Run: ``python benchmarks/run_overhead.py [--rounds 5] [--measured 20]`` (the workload itself runs as
``python benchmarks/run_overhead.py --workload ...``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[1]
ARMS = ("raw", "sbprof", "plain", "continue")


def mlp_loop() -> Tuple[Any, Any, List[Tuple[Any, Any]]]:
    """The benchmark's model, optimiser and 8 batches (one thread, seeded): the same in every arm."""
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    layers: List[torch.nn.Module] = []
    for _ in range(8):
        layers += [torch.nn.Linear(512, 512), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = [(torch.randn(64, 512), torch.randn(64, 512)) for _ in range(8)]
    return model, opt, data


def workload(args: argparse.Namespace) -> None:
    """The training loop; with ``--times FILE`` it writes its own step times (``--skip`` first ones left out)."""
    import torch

    model, opt, data = mlp_loop()
    loader = torch.utils.data.DataLoader(data * (args.steps // 8 + 1), batch_size=None)
    profiler = None
    times: List[List[float]] = []  # (wall, process CPU) seconds per step
    for step, (x, y) in enumerate(loader):
        if step == args.steps:
            break
        if args.mode == "raw" and step == args.skip:
            profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
            profiler.start()
        start, cpu = time.perf_counter(), time.process_time()
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append([time.perf_counter() - start, time.process_time() - cpu])
    if profiler is not None:
        profiler.stop()
    if args.times:
        Path(args.times).write_text(json.dumps(times[args.skip:]))


def blocks_in_process(pairs: int) -> List[float]:
    """Hooked / bare CPU step-time ratios in one process, one per pair of alternating blocks (see the docstring)."""
    import torch

    from sbprof.script.hooks import Hooks
    from sbprof.script.session import Session

    model, opt, data = mlp_loop()

    def block(n: int = 20) -> float:
        cpu: List[float] = []
        for x, y in torch.utils.data.DataLoader(data * 3, batch_size=None):
            start = time.process_time()
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            cpu.append(time.process_time() - start)
        return statistics.median(cpu[:n])

    block()
    session = Session(1, 2, keep_going=True, trace_dir=None)
    ratios = []
    for _ in range(pairs):
        hooks = Hooks(session)
        hooks.install()
        block(3)  # the window (once), then past it: what --continue leaves installed
        hooked = block()
        hooks.remove()
        ratios.append(hooked / block())
    return ratios


def run_arm(arm: str, folder: Path, warmup: int, measured: int, skip: int) -> List[List[float]]:
    """One fresh process of ``arm``: the (wall, CPU) seconds of each step it reports."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get(
        "PYTHONPATH", "")])}
    times = folder / f"{arm}.json"
    script = [str(Path(__file__).resolve()), "--workload"]
    if arm == "raw":
        command = [*script, "--mode", "raw", "--skip", str(warmup), "--steps", str(warmup + measured),
                   "--times", str(times)]
    elif arm == "sbprof":
        out = folder / "sbprof"
        command = ["-m", "sbprof", "run", "--warmup", str(warmup), "--measured", str(measured), "--output_folder",
                   str(out), *script, "--steps", str(warmup + measured)]
    else:
        prefix = ["-m", "sbprof", "run", "--continue", "--no-trace", "--warmup", "1", "--measured", "2",
                  "--output_folder", str(folder / "continue")] if arm == "continue" else []
        command = [*prefix, *script, "--skip", str(skip), "--steps", str(skip + measured), "--times", str(times)]
    subprocess.run([sys.executable, *command], env=env, check=True, capture_output=True, timeout=600)
    if arm == "sbprof":
        record = json.loads((folder / "sbprof" / "results.json").read_text())["records"][0]
        return [list(pair) for pair in zip(record["wall_s"], record["cpu_s"])]
    return json.loads(times.read_text())


def quartiles(values: List[float]) -> str:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"{q[1]:.3f} [{q[0]:.3f}, {q[2]:.3f}]"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--mode", default="none", help=argparse.SUPPRESS)
    p.add_argument("--steps", type=int, default=30, help=argparse.SUPPRESS)
    p.add_argument("--skip", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--times", default=None, help=argparse.SUPPRESS)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--measured", type=int, default=20)
    p.add_argument("--blocks", type=int, default=40, help="pairs of blocks for the in-process measure")
    args = p.parse_args()
    if args.workload:
        workload(args)
        return
    skip = 10  # steps the outside-window arms leave out: well past --continue's 3 recorded steps
    medians: Dict[str, List[List[float]]] = {arm: [] for arm in ARMS}  # per round: median wall, median CPU
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for arm in ARMS[r % len(ARMS):] + ARMS[:r % len(ARMS)]:
                folder = Path(tmp) / f"{arm}{r}"
                folder.mkdir()
                steps = run_arm(arm, folder, args.warmup, args.measured, skip)
                medians[arm].append([statistics.median(s[i] for s in steps) for i in (0, 1)])
            print(f"round {r + 1}: " + ", ".join(f"{a} {1e3 * medians[a][-1][0]:.2f} ms wall, "
                                                 f"{1e3 * medians[a][-1][1]:.2f} ms CPU" for a in ARMS), flush=True)
    for i, clock in enumerate(("wall", "CPU")):
        recording = [s[i] / r[i] for s, r in zip(medians["sbprof"], medians["raw"])]
        outside = [c[i] / p[i] for c, p in zip(medians["continue"], medians["plain"])]
        print(f"\n{clock} time, median [q1, q3] over {args.rounds} rounds of each round's median step ratio:")
        print(f"  recording, sbprof run / raw torch.profiler: {quartiles(recording)}")
        print(f"  outside the window, --continue / unprofiled: {quartiles(outside)}")
    print(f"\nin one process, CPU time, hooks past their window / none: {quartiles(blocks_in_process(args.blocks))} "
          f"(median [q1, q3] over {args.blocks} pairs of blocks)")

if __name__ == "__main__":
    main()
