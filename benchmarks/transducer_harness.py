#!/usr/bin/env python3
"""Does the transducer harness time a step as a bare loop would? Prints harness / bare ratio.

Side by side in one run, alternating, each in a fresh process with the same
thread count: (a) the benchmark's worker (:mod:`sbprof.transducer.worker`)
measuring ``--steps`` steps of one backend on one fixed batch; (b) a bare
``perf_counter`` loop written here independently (random encoder /
prediction outputs, ``Linear(tanh(enc + dec))``, the library's loss,
``backward``), same shapes. Target: medians within 3 %.

    PYTHONPATH=. python benchmarks/transducer_harness.py [--backend torchaudio] [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sbprof.workers.supervisor import Supervisor, WorkerJob  # noqa: E402

BARE = r"""
import json, sys, time, torch
shapes, vocab, dim, steps, warmup, backend = json.loads(sys.argv[1])
torch.set_num_threads(int(sys.argv[2]))
torch.set_num_interop_threads(int(sys.argv[2]))
if backend == "torchaudio":
    import torchaudio.functional
    def loss_fn(logits, targets, t, u):
        return torchaudio.functional.rnnt_loss(logits, targets, t, u, blank=0, reduction="sum")
else:
    import k2
    def loss_fn(logits, targets, t, u):
        zeros = torch.zeros_like(t, dtype=torch.int64)
        boundary = torch.stack([zeros, zeros, u.long(), t.long()], dim=1)
        return k2.rnnt_loss(logits, targets.long(), 0, boundary, reduction="sum")
linear = torch.nn.Linear(dim, vocab)
n, t_max, u_max = len(shapes), max(s[0] for s in shapes), max(s[1] for s in shapes)
t = torch.tensor([s[0] for s in shapes], dtype=torch.int32)
u = torch.tensor([s[1] for s in shapes], dtype=torch.int32)
times = []
for i in range(warmup + steps):
    enc = torch.rand(n, t_max, dim, requires_grad=True)
    dec = torch.rand(n, u_max + 1, dim, requires_grad=True)
    targets = torch.randint(1, vocab, (n, u_max), dtype=torch.int32)
    start = time.perf_counter()
    logits = linear(torch.tanh(enc.unsqueeze(2) + dec.unsqueeze(1)))
    loss_fn(logits, targets, t, u).backward()
    elapsed = time.perf_counter() - start
    linear.zero_grad(set_to_none=True)
    if i >= warmup:
        times.append(elapsed)
print(json.dumps(times))
"""


def harness(python: str, backend: str, shapes, vocab: int, dim: int, steps: int, warmup: int, threads: int):
    """The benchmark's own worker (:mod:`sbprof.transducer.worker`) under the core's supervisor."""
    item = {"cell": {"model": backend, "params": {"mode": "fixed"}}, "label": backend, "settings": {},
            "kind": "measure", "unmeasured": warmup, "steps": [shapes] * (warmup + steps), "padding": {},
            "step_shapes": []}
    records = []

    def crashed(index: int, message: str) -> None:
        raise SystemExit(f"harness worker crashed: {message}")

    with tempfile.TemporaryDirectory() as folder:
        payload = {"backend": backend, "device": "cpu", "threads": threads, "vocab_size": vocab, "joiner_dim": dim,
                   "blank": 0, "seed": 0, "output_folder": folder, "items": [item]}
        job = WorkerJob(module="sbprof.transducer.worker", payload=payload, n_items=1, name="harness worker",
                        log_path=Path(folder) / "worker.log", python=python,
                        env={"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)})
        Supervisor(job, lambda index, record: records.append(record), crashed).run()
    (record,) = records
    if record["status"] != "ok":
        raise SystemExit(f"harness failed under {python}: {record['message']}")
    return record["wall_s"]


def bare(python: str, backend: str, shapes, vocab: int, dim: int, steps: int, warmup: int, threads: int):
    args = json.dumps([shapes, vocab, dim, steps, warmup, backend])
    env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([python, "-c", BARE, args, str(threads)], capture_output=True, text=True, env=env,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="torchaudio", choices=["torchaudio", "k2"])
    parser.add_argument("--python", default=sys.executable, help="interpreter for both (k2: the k2 venv)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--vocab", type=int, default=500)
    parser.add_argument("--dim", type=int, default=512)
    args = parser.parse_args()
    shapes = [[48, 10], [44, 9], [40, 8], [36, 7]]  # a scaled-down LibriSpeech-like batch (T, U)
    pooled = {"harness": [], "bare": []}
    ratios = []
    for r in range(args.rounds):
        medians = {}
        # Alternate which goes first, so a slow drift of the machine does not favour one side.
        for name, fn in (("harness", harness), ("bare", bare)) if r % 2 == 0 else (("bare", bare), ("harness", harness)):
            samples = fn(args.python, args.backend, shapes, args.vocab, args.dim, args.steps, args.warmup, args.threads)
            pooled[name].extend(samples)
            medians[name] = statistics.median(samples)
        ratios.append(medians["harness"] / medians["bare"])
        print(f"round {r + 1}: harness {medians['harness'] * 1e3:8.2f} ms, bare {medians['bare'] * 1e3:8.2f} ms, "
              f"ratio {ratios[-1]:.3f}")
    h, b = statistics.median(pooled["harness"]), statistics.median(pooled["bare"])
    print(f"{args.backend}: harness median {h * 1e3:.2f} ms, bare loop median {b * 1e3:.2f} ms (pooled); "
          f"ratio harness / bare = {h / b:.3f} (median of round ratios {statistics.median(ratios):.3f}; "
          f"target within 3 %: {'yes' if abs(h / b - 1) <= 0.03 else 'no'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
