"""The plan of ``sbprof run --vary``: every variant measured by a fresh ``sbprof run`` process, round after round.

Round ``r`` runs each variant once, in the same order (A B C, A B C, ...), so
that a slow drift of the machine spreads over the variants instead of biasing
one. Each run is ``sbprof run`` with the variant's knobs set
(:mod:`sbprof.cli.vary_child`), its own ``--warmup``/``--measured`` and no trace,
in ``variants/<variant>/round<r>/`` of the output folder; its ``results.json``
is read back and each of its stages becomes a record of this run (the
variant in the cell's ``params``, the round as the cell's run), with the
losses its first steps computed. A run that fails (an error, the OOM killer,
a script refusing an argument, nothing measured) is one ``error`` record with
its reason, and the other runs go on; a variant whose first run failed is
not run again. A run already stored is not run again
(resume); no run starts that would end past ``time_budget_s`` (as long as
the longest run so far), and a run still going when the budget ends (a
slower round, a hang) is stopped there, with its DataLoader workers, and
recorded as failed: the budget bounds the comparison's time. After ``rounds``,
adaptive repeats add rounds, up to ``max_rounds``, while a variant's
throughput ratio is too wide to decide (:func:`~sbprof.analysis.vary.imprecise`),
each added round's reason in the notes.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from sbprof.analysis.run import RunPayload
from sbprof.analysis.vary import MAX_ROUNDS, PRECISION
from sbprof.jobs.plan import JobPlan, Records, Step, StoreView
from sbprof.jobs.preamble import Preamble
from sbprof.record import Cell, Measurement
from sbprof.record.results import Results
from sbprof.script.launch import Target
from sbprof.script.vary import Variant
from sbprof.script import VARY

VARIANTS_DIR = "variants"
LOSSES = "losses.json"
MAX_LOSS = 1e30
"""A loss past this (or not finite) is kept as ``None``: results hold no figure out of any sense."""


@dataclass
class VaryConfig:
    """What ``sbprof run --vary`` was asked: the target, the variants (base first), rounds, steps, tolerance."""

    preamble: Preamble
    target: Target
    variants: List[Variant]
    rounds: int = 4
    max_rounds: int = MAX_ROUNDS
    precision: float = PRECISION
    loss_tolerance: float = 0.02
    time_budget_s: Optional[float] = None
    specs: List[str] = field(default_factory=list)
    one_at_a_time: bool = False
    try_suggested: bool = False
    suggested: Dict[str, str] = field(default_factory=dict)  # variant -> the base run's verdict that suggested it

    def rules(self) -> Dict[str, Any]:
        return {"script": self.target.path, "module": self.target.module, "args": list(self.target.args),
                "warmup": self.preamble.warmup, "measured": self.preamble.measured, "vary": list(self.specs),
                "one_at_a_time": self.one_at_a_time, "rounds": self.rounds, "max_rounds": self.max_rounds,
                "precision": self.precision, "loss_tolerance": self.loss_tolerance,
                "variants": [v.to_dict() for v in self.variants], "try": "suggested" if self.try_suggested else None,
                "suggested": dict(self.suggested)}


def safe_name(name: str) -> str:
    """A variant's name as a folder name (``num_workers_2__threads_2``)."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def failure_reason(returncode: int, stderr: str) -> str:
    """Why a variant's run failed, in one line, from its exit status and the last line it printed.

    Example
    -------
    >>> failure_reason(2, "train.py: error: unrecognized arguments: --bs 8\\nsbprof: error: no step was seen\\n")
    'exit status 2: train.py: error: unrecognized arguments: --bs 8'
    >>> failure_reason(-9, "")
    'killed by signal 9 (the out-of-memory killer?)'
    """
    if returncode < 0:
        return f"killed by signal {-returncode}" + (" (the out-of-memory killer?)" if returncode == -9 else "")
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    own = [line for line in errors if not line.startswith("sbprof:")]  # the script's own words first
    last = (own or errors or lines or ["nothing printed"])[-1]
    return f"exit status {returncode}: {last[:300]}"


def run_bounded(command: List[str], env: Dict[str, str], timeout: Optional[float]) -> Tuple[Optional[int], str]:
    """Run ``command`` to its end or for ``timeout`` seconds at most: its exit status (``None`` when it was
    stopped there, it and every process it started killed) and what it printed on stderr.

    Example
    -------
    >>> run_bounded([sys.executable, "-c", "import sys; sys.exit('no')"], dict(os.environ), None)
    (1, 'no\\n')
    >>> run_bounded([sys.executable, "-c", "import time; time.sleep(60)"], dict(os.environ), 0.5)[0] is None
    True
    """
    with subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          errors="replace") as proc:
        try:
            _, stderr = proc.communicate(timeout=timeout)
            return proc.returncode, stderr
        except subprocess.TimeoutExpired:
            _kill_tree(proc.pid)
            return None, proc.communicate()[1]
        except BaseException:  # interrupted: the run goes with the comparison, its workers too
            _kill_tree(proc.pid)
            raise


def _kill_tree(pid: int) -> None:
    """Kill process ``pid`` and its descendants (DataLoader workers), children first."""
    import psutil

    try:
        root = psutil.Process(pid)
        family = root.children(recursive=True) + [root]
    except psutil.NoSuchProcess:
        return
    for p in family:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(family, timeout=10)


class VaryPlan(JobPlan):
    """Rounds over the variants, each run a fresh ``sbprof run`` process (see the module docstring)."""

    job = VARY.name  # the name its Job gives
    cfg: VaryConfig

    def __init__(self, cfg: VaryConfig, log: Any = print):
        super().__init__(cfg)
        self.log = log
        self.started = time.monotonic()  # the comparison's start (reset when its steps begin): the budget's origin

    def time_left(self) -> Optional[float]:
        """Seconds left of the time budget (``None``: no budget): the most a run may still take."""
        budget = self.cfg.time_budget_s
        return None if budget is None else max(0.0, budget - (time.monotonic() - self.started))

    def header(self) -> Results:
        target = self.cfg.target
        return self.results(self.cfg.rules(), {target.name: {"script": target.path, "module": target.module}})

    def expected(self) -> int:
        return len(self.cfg.variants) * self.cfg.rounds

    def steps(self, view: StoreView) -> Iterator[Step]:
        self.started = started = time.monotonic()
        longest = 0.0
        for round_index in range(self.cfg.max_rounds):
            if round_index >= self.cfg.rounds:
                why = self.more_rounds(view, round_index)
                if why is None:
                    return
                if self._to_run(view, round_index):  # said once: not again when a resumed run finds it stored
                    yield Records([], notes=[why])
            for variant in self._to_run(view, round_index):
                budget = self.cfg.time_budget_s
                if budget is not None and time.monotonic() - started + longest > budget:
                    yield Records([], notes=[f"the time budget of {budget:g} s ended the comparison before round "
                                             f"{round_index + 1} of {self.cfg.rounds}-{self.cfg.max_rounds}"])
                    return
                began = time.monotonic()
                yield Records(self.measure(variant, round_index, self.stages(view)))
                longest = max(longest, time.monotonic() - began)

    def _to_run(self, view: StoreView, round_index: int) -> List[Variant]:
        """The variants round ``round_index`` still runs: not stored (resume), and whose first run did not fail."""
        out = []
        for variant in self.cfg.variants:
            mine = {m.cell.run: m for m in view.records() if m.cell.params.get("variant") == variant.name}
            if not (round_index in mine or (0 in mine and not mine[0].ok)):
                out.append(variant)
        return out

    def more_rounds(self, view: StoreView, round_index: int) -> Optional[str]:
        """Why round ``round_index`` (past the minimum) runs: the throughput ratios still too wide to decide
        (:func:`~sbprof.analysis.vary.imprecise`); ``None`` when they are all precise enough."""
        from sbprof.analysis.vary import analyse, imprecise

        report = analyse(replace(self.header(), records=list(view.records())))
        wide = imprecise(report, self.cfg.precision)
        if not wide:
            return None
        said = ", ".join(f"{name} +-{100 * w:.0f} %" if w != float("inf") else f"{name} (no interval yet)"
                         for name, w in wide.items())
        return (f"round {round_index + 1} added: the throughput ratio is wider than +-{100 * self.cfg.precision:g} % "
                f"for {said}")

    def stages(self, view: StoreView) -> List[str]:
        """``--stages MAIN`` once the base has run: the figures come from its main stage only
        (:func:`~sbprof.analysis.vary.main_stage`), so a run stops once that stage has its steps instead of
        running the epochs another stage's steps need; before, nothing (every stage, to learn them)."""
        from sbprof.analysis.vary import main_stage

        base = self.cfg.variants[0].name
        records = list(view.records())
        if not any(m.ok and m.cell.params.get("variant") == base for m in records):
            return []
        return ["--stages", main_stage(records, base)]

    def command(self, variant: Variant, folder: Path, losses: Path, stages: Sequence[str] = ()) -> List[str]:
        """The variant's ``sbprof run`` process: its knobs, the job's steps (of ``stages``: ``--stages``'
        option), its own folder, the script's arguments then the variant's."""
        pre, target = self.cfg.preamble, self.cfg.target
        what = ["-m", target.module] if target.module else [target.path]
        return [sys.executable, "-m", "sbprof.cli.vary_child", json.dumps(variant.knobs), str(losses),
                "--warmup", str(pre.warmup), "--measured", str(pre.measured), "--no-trace", *stages,
                "--output_folder", str(folder), *what, *target.args, *variant.args]

    def measure(self, variant: Variant, round_index: int, stages: Sequence[str] = ()) -> List[Measurement]:
        """The records of one run of ``variant``: one per stage, or one ``error`` record with the reason."""
        folder = Path(self.pre.output_folder) / VARIANTS_DIR / safe_name(variant.name) / f"round{round_index}"
        shutil.rmtree(folder, ignore_errors=True)  # a run interrupted before: sbprof run refuses its folder
        folder.parent.mkdir(parents=True, exist_ok=True)
        losses = folder.parent / f"round{round_index}.{LOSSES}"
        env = dict(os.environ)
        if "threads" in variant.knobs:
            env.update(OMP_NUM_THREADS=str(variant.knobs["threads"]), MKL_NUM_THREADS=str(variant.knobs["threads"]))
        self.log(f"round {round_index + 1}/{max(self.cfg.rounds, round_index + 1)}: {variant.name}")
        began = time.monotonic()
        returncode, stderr = run_bounded(self.command(variant, folder, losses, list(stages)), env, self.time_left())
        (folder.parent / f"round{round_index}.stderr.txt").write_text(stderr)
        params = {"variant": variant.name}
        records = self._read(folder / "results.json", params, round_index) if returncode == 0 else []
        if not records:
            reason = (failure_reason(returncode, stderr) if returncode is not None else
                      f"stopped after {time.monotonic() - began:.0f} s: the time budget of "
                      f"{self.cfg.time_budget_s:g} s ended")
            self.log(f"variant {variant.name!r} failed in round {round_index + 1}: {reason}")
            from sbprof.measuring.env import collect_env

            return [Measurement(label=f"{variant.name} round {round_index + 1}", status="error", message=reason,
                                cell=Cell(model=self.cfg.target.name, params=params, run=round_index),
                                env=collect_env())]
        values = [v if isinstance(v, (int, float)) and abs(v) <= MAX_LOSS else None  # NaN and inf fail both
                  for v in (json.loads(losses.read_text()) if losses.is_file() else [])]
        return [replace(m, extra={**m.extra, **RunPayload(losses=values).to_dict()}) for m in records]

    def _read(self, path: Path, params: Dict[str, Any], round_index: int) -> List[Measurement]:
        if not path.is_file():
            return []
        data = json.loads(path.read_text())
        records = [Measurement.from_dict(r) for r in data.get("records", [])]
        return [replace(m, cell=replace(m.cell, params={**m.cell.params, **params}, run=round_index),
                        label=f"{params['variant']}:{m.cell.variant}") for m in records if m.ok]
