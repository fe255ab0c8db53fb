"""How often the regression gate cries wolf, and how often it catches a real slowdown.

The gate (:func:`sbprof.analysis.verdict.compare_runs`) compares run medians
of fresh processes. For each number of runs per side, each repetition draws
three independent sets of runs from the same "measure one run -> samples"
callable: a baseline, an identical candidate and a candidate whose samples
are multiplied by the injected slowdown (real noise, a known change). It
reports the false-alarm rate (identical code called regressed; target
<= 5%) and the detection rate (the slowed candidate called regressed;
target >= 90%), each with its exact 95% binomial interval, beside a bare
rank test on pooled batch samples (p < 0.025 one-sided and median more than
the threshold slower), which is what the gate must not be.

Noise model for the simulation (measured on the default model, see
../shared/README.md): each run's level varies between fresh processes with
CV 10% (lognormal); within a run, batches scatter with quartiles at about
+-3% (lognormal, sigma 0.03 / 0.6745); 10 batches per run.

``--real N`` also measures N fresh-process runs of a small numpy workload
and draws runs from that pool (with replacement; a pool much larger than the
runs per side keeps repetitions nearly independent). Pass your own callable
to :func:`gate_power` for a real model.

``--model [NAME]`` (``--model`` alone: ``encoder_asr``) measures a real model the
way ``sbprof compare-models`` does: ``--model-runs R`` fresh worker
processes of the model and R of the same model slowed down, interleaved
(one point: ``--model-audio`` seconds x 1, ``--model-samples`` calls (100) after 2 warm-up calls,
1 thread). The slowdown is injected after each call as a busy wait of 10%
of that call's measured time (:func:`slowed`), so it scales with the real
work and carries the machine's noise. A sleep would be the obvious choice,
but on a shared 2-core machine a sleeping worker wakes up late (it waits
for a core): a "10%" sleep measured 1.19x here under load. Each
repetition then draws, without replacement, n baseline and n identical
runs from the baseline pool (disjoint) and n slowed runs:
false alarms and detection per n, as above. The repetitions resample one
pool of R runs, so they are not independent: their binomial intervals are
narrower than the truth, and the pool's own luck is in every row.
``--pool-folder DIR`` keeps the runs, so a second call re-scores them
without measuring (or adds runs up to a larger ``--model-runs``).

Every table is printed once per ``--statistics`` entry: the figure each run
is reduced to before the gate compares runs (``median``, the gate's
default, and ``p10``, its 10th percentile, by default).

Run: ``python benchmarks/gate_power.py [--repetitions 1000] [--real 40] [--model --model-runs 12]
[--pool-folder DIR] [--statistics median p10]``
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np
from scipy.stats import binomtest, mannwhitneyu

from sbprof.analysis.verdict import compare_runs, run_statistic

MeasureRun = Callable[[], Sequence[float]]
SLOWDOWN_ENV = "GATE_POWER_SLOWDOWN"
BENCHMARKS = Path(__file__).resolve().parent


def synthetic_runs(rng: np.random.Generator, between_cv: float = 0.10, within_quartile: float = 0.03,
                   batches: int = 10) -> MeasureRun:
    """A "measure one run" callable drawing from the noise model above."""
    sigma_between = math.sqrt(math.log(1 + between_cv ** 2))
    sigma_within = math.log(1 + within_quartile) / 0.6745  # quartiles of a normal sit at +-0.6745 sigma

    def run() -> List[float]:
        level = math.exp(rng.normal(0.0, sigma_between))
        return list(level * np.exp(rng.normal(0.0, sigma_within, batches)))

    return run


_WORKLOAD = """
import json, time, numpy as np
a = np.random.default_rng(0).random((160, 160))
samples = []
for i in range({total}):
    t = time.perf_counter()
    for _ in range(20):
        a = np.tanh(a @ a.T / 160.0)
    if i >= {warmup}:
        samples.append(time.perf_counter() - t)
print(json.dumps(samples))
"""


def fresh_process_run(batches: int = 10, warmup: int = 2) -> List[float]:
    """One run of a small numpy workload in a fresh interpreter: its batch times."""
    code = _WORKLOAD.format(total=batches + warmup, warmup=warmup)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                              "MKL_NUM_THREADS": "1"})
    return json.loads(out.stdout)


def pooled(measure_run: MeasureRun, pool_size: int, rng: np.random.Generator) -> MeasureRun:
    """Measure ``pool_size`` runs now; the returned callable draws one of them at random."""
    pool = [list(measure_run()) for _ in range(pool_size)]
    return lambda: pool[int(rng.integers(pool_size))]


def slowed(interface: type, method: str) -> type:
    """A subclass of ``interface`` whose ``method`` spins, after each call, ``$GATE_POWER_SLOWDOWN`` (e.g.
    0.1) times the time the call took: a slowdown proportional to the real work, with the machine's noise."""
    def slow_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = getattr(interface, method)(self, *args, **kwargs)
        t1 = time.perf_counter()
        deadline = t1 + float(os.environ[SLOWDOWN_ENV]) * (t1 - t0)
        while time.perf_counter() < deadline:
            pass
        return out

    return type(f"Slowed{interface.__name__}", (interface,), {method: slow_call})


def __getattr__(name: str) -> type:
    """``gate_power.Slowed<Interface>``: what a worker imports by dotted path (built on first use)."""
    if not name.startswith("Slowed"):
        raise AttributeError(name)
    from sbprof.models.interfaces import interface_class, resolve_interface

    base = name[len("Slowed"):]
    cls = slowed(interface_class(base), resolve_interface(base).method)
    globals()[name] = cls
    return cls


def model_pools(model: str, runs: int, audio_s: float, slowdown: float, samples: int = 100,
                folder: Path = None) -> Tuple[List[List[float]], List[List[float]]]:
    """Batch times of ``runs`` fresh-process runs of ``model`` and of the same model slowed (interleaved).

    ``folder`` keeps the runs (a comparison results folder): run again with it to re-score them, or with a
    larger ``runs`` to add only the missing ones. Without it they go to a temporary folder."""
    from sbprof.compare_models.config import validate
    from sbprof.models.interfaces import resolve_interface
    from sbprof.registry import get_job
    from sbprof.jobs.runner import run_config
    from sbprof.models.build import LOCAL_MODELS
    from sbprof.results import load_results, prepare_output_folder

    interface = LOCAL_MODELS[model]
    spec = resolve_interface(interface)
    os.environ[SLOWDOWN_ENV] = str(slowdown - 1)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(BENCHMARKS), os.environ.get("PYTHONPATH")) if p)
    folder = prepare_output_folder(folder) if folder else Path(tempfile.mkdtemp(prefix="sbprof-gate-power-"))
    tree = {"variants": [{"name": "baseline", "source": model, "type": interface},
                         {"name": "slowed", "source": model, "type": f"gate_power.Slowed{interface}",
                          "method": spec.method, "args": list(spec.args)}],
            "vary": "audio_s", "values": [audio_s], "measured": samples, "warmup": 2, "repeats": {"runs": runs},
            "devices": "cpu", "cpu_threads": 1, "example_audio": "example", "energy": {"cpu": False, "gpu": False},
            "output_folder": str(folder)}
    sys.path.insert(0, str(BENCHMARKS))  # validation imports the slowed class too
    run_config(get_job("compare-models"), validate(tree, "gate_power", BENCHMARKS, {"noprogressbar": True}),
               log=lambda line: None)
    records = load_results(folder).records
    pool = {name: [m.wall_s for m in sorted(records, key=lambda m: m.cell.run) if m.cell.variant == name and m.ok]
            for name in ("baseline", "slowed")}
    return pool["baseline"], pool["slowed"]


def gate_power_pools(base_pool: List[List[float]], slow_pool: List[List[float]], runs_per_side: int,
                     repetitions: int, rng: np.random.Generator, threshold: float = 0.05,
                     confidence: float = 0.95, statistic: str = "median") -> Dict[str, object]:
    """False alarms and detection from measured pools, drawing runs without replacement in each repetition."""
    def draw() -> Tuple[List[List[float]], ...]:
        picked = rng.choice(len(base_pool), 2 * runs_per_side, replace=False)
        base = [base_pool[i] for i in picked[:runs_per_side]]
        same = [base_pool[i] for i in picked[runs_per_side:]]
        slow = [slow_pool[i] for i in rng.choice(len(slow_pool), runs_per_side, replace=False)]
        return base, same, slow

    return _rates(draw, runs_per_side, repetitions, threshold, confidence, statistic)


def _rates(draw: Callable[[], Tuple[List[List[float]], ...]], runs_per_side: int, repetitions: int,
           threshold: float, confidence: float, statistic: str) -> Dict[str, object]:
    """Score ``repetitions`` draws of (baseline, identical, slowed) runs: the gate, and a pooled rank test beside it."""
    false_alarms = detections = pooled_alarms = 0
    for _ in range(repetitions):
        base, same, slow = draw()
        false_alarms += compare_runs(base, same, threshold, confidence, statistic=statistic).verdict == "regressed"
        detections += compare_runs(base, slow, threshold, confidence, statistic=statistic).verdict == "regressed"
        flat_base, flat_same = np.concatenate(base), np.concatenate(same)
        pooled_alarms += bool(
            mannwhitneyu(flat_same, flat_base, alternative="greater").pvalue < (1 - confidence) / 2
            and np.median(flat_same) > (1 + threshold) * np.median(flat_base)
        )
    return {
        "runs_per_side": runs_per_side, "repetitions": repetitions,
        "false_alarm": _rate(false_alarms, repetitions), "detection": _rate(detections, repetitions),
        "pooled_false_alarm": _rate(pooled_alarms, repetitions),
    }


def _rate(hits: int, trials: int) -> Dict[str, float]:
    ci = binomtest(hits, trials).proportion_ci(confidence_level=0.95, method="exact")
    return {"rate": hits / trials, "low": ci.low, "high": ci.high}


def gate_power(measure_run: MeasureRun, runs_per_side: int, repetitions: int, slowdown: float = 1.10,
               threshold: float = 0.05, confidence: float = 0.95, statistic: str = "median") -> Dict[str, object]:
    """False-alarm and detection rates of the gate for one number of runs per side."""
    def draw() -> Tuple[List[List[float]], ...]:
        base = [list(measure_run()) for _ in range(runs_per_side)]
        same = [list(measure_run()) for _ in range(runs_per_side)]
        slow = [[slowdown * x for x in measure_run()] for _ in range(runs_per_side)]
        return base, same, slow

    return _rates(draw, runs_per_side, repetitions, threshold, confidence, statistic)


def _table(title: str, rows: List[Dict[str, object]], slowdown: float) -> str:
    pct = lambda r: f"{100 * r['rate']:5.1f}% [{100 * r['low']:4.1f}, {100 * r['high']:5.1f}]"
    lines = [title, f"{'runs/side':>9}  {'false alarm (identical)':>26}  "
                    f"{f'detection ({100 * (slowdown - 1):g}% slower)':>26}  {'pooled-batch test false alarm':>30}"]
    for r in rows:
        lines.append(f"{r['runs_per_side']:>9}  {pct(r['false_alarm']):>26}  {pct(r['detection']):>26}  "
                     f"{pct(r['pooled_false_alarm']):>30}")
    ok = [r["runs_per_side"] for r in rows
          if r["false_alarm"]["high"] <= 0.05 and r["detection"]["rate"] >= 0.90]
    lines.append(f"smallest runs/side with false alarm <= 5% (upper bound) and detection >= 90%: "
                 f"{min(ok) if ok else 'none in this list'}")
    return "\n".join(lines)


def main(argv: Sequence[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repetitions", type=int, default=1000)
    parser.add_argument("--runs", type=int, nargs="+", default=[4, 6, 8, 10, 15, 20, 25, 30, 40])
    parser.add_argument("--slowdown", type=float, default=1.10)
    parser.add_argument("--threshold", type=float, default=0.05)
    parser.add_argument("--real", type=int, default=0, help="pool size of fresh-process runs (0: simulation only)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", nargs="?", const="encoder_asr", default=None,
                        help="a local model measured in fresh processes (alone: encoder_asr)")
    parser.add_argument("--model-runs", type=int, default=12, help="fresh-process runs per pool (baseline, slowed)")
    parser.add_argument("--model-samples", type=int, default=100, help="measured calls per run (compare's default)")
    parser.add_argument("--statistics", nargs="+", default=["median", "p10"],
                        help="per-run figures the gate is scored with (median, min, pNN)")
    parser.add_argument("--model-audio", type=float, default=2.0, help="seconds of audio per call")
    parser.add_argument("--pool-folder", type=Path, help="keep the model's runs here (resumed and re-scored on reruns)")
    parser.add_argument("--skip-simulation", action="store_true")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    header = (f"gate: threshold {100 * args.threshold:g}%, 95% interval, {args.repetitions} repetitions per row; "
              "rates with exact 95% binomial intervals")
    print(header)
    if not args.skip_simulation:
        for statistic in args.statistics:
            t0 = time.perf_counter()
            rows = [gate_power(synthetic_runs(rng), n, args.repetitions, args.slowdown, args.threshold,
                               statistic=statistic) for n in args.runs]
            print(_table(f"simulated, run {statistic}s: between-process CV 10%, within-run quartiles +-3%, "
                         "10 batches per run", rows, args.slowdown))
            print(f"({time.perf_counter() - t0:.0f} s)")
    if args.model:
        t0 = time.perf_counter()
        base_pool, slow_pool = model_pools(args.model, args.model_runs, args.model_audio, args.slowdown,
                                           args.model_samples, args.pool_folder)
        print(f"\nmodel {args.model}: {len(base_pool)} + {len(slow_pool)} fresh-process runs "
              f"({args.model_audio:g} s x 1, {args.model_samples} calls, 1 thread) in {time.perf_counter() - t0:.0f} s")
        sizes = [n for n in args.runs if 2 * n <= len(base_pool) and n <= len(slow_pool)]
        for statistic in args.statistics:
            figure = run_statistic(statistic)
            base, slow = np.array([figure(r) for r in base_pool]), np.array([figure(r) for r in slow_pool])
            print(f"\nrun {statistic}s: {1e3 * np.median(base):.2f} ms, between-run CV "
                  f"{100 * np.std(base) / np.mean(base):.1f}%; "
                  f"slowed / baseline {np.median(slow) / np.median(base):.3f}")
            rows = [gate_power_pools(base_pool, slow_pool, n, args.repetitions, rng, args.threshold,
                                     statistic=statistic) for n in sizes]
            print(_table(f"model {args.model}, run {statistic}s: runs drawn without replacement from the pools "
                         "(resampled, not independent)", rows, args.slowdown))
    if args.real:
        t0 = time.perf_counter()
        draw = pooled(fresh_process_run, args.real, rng)
        meds = [float(np.median(draw())) for _ in range(200)]
        print(f"\nreal pool: {args.real} fresh-process runs of a numpy workload in {time.perf_counter() - t0:.0f} s; "
              f"run medians CV {100 * np.std(meds) / np.mean(meds):.1f}% (drawn 200 times)")
        sizes = [n for n in args.runs if n <= args.real]
        for statistic in args.statistics:
            rows = [gate_power(draw, n, args.repetitions, args.slowdown, args.threshold, statistic=statistic)
                    for n in sizes]
            print(_table(f"real: runs drawn from the pool of {args.real}, run {statistic}s", rows, args.slowdown))


if __name__ == "__main__":
    main()
