"""The GPU check: every CUDA test of the suite and every CUDA ground truth, in one bounded run, as one table.

    python benchmarks/gpu_check.py OUTDIR [--budget_s 560] [--only measuring,train] [--setup-only]

On a machine without a usable CUDA device it prints one line saying so and
exits 0. Otherwise it installs what the machine lacks from the carried
``gpu_wheels/`` (offline, only the missing distributions: see
``benchmarks/gpu_setup.py``), prints the versions it runs with, then runs
``pytest -m cuda`` in parts (one pytest process per part of the suite, each
with its own timeout inside the overall budget, so a part that hangs or
crashes is a row with the reason and the others still run). Each CUDA ground
truth records its comparison (``benchmarks/gpu_truths.py``); every other CUDA
test is a row with its outcome. It prints one table, ``figure | sbprof |
outside reference | agreement | holds?``, and writes into OUTDIR:

- ``gpu_check.md`` and ``gpu_check.json``: the versions and the table;
- ``gpu_check.log``: every part's pytest output;
- ``gpu_reports.md``: the reports the jobs wrote on the GPU (excerpts for the
  docs), as the tests kept them.

Exit status: 0 when every compared figure held and every part ran to its end,
1 otherwise, 2 for a bad command line.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import gpu_setup  # noqa: E402
from benchmarks.gpu_truths import FIGURES_ENV, REPORTS_ENV, Figure, as_json, markdown, read_figures  # noqa: E402

ROOT = gpu_setup.ROOT


@dataclass(frozen=True)
class Part:
    """One pytest process: ``pytest -m cuda PATHS`` (``rest``: every other test folder), at most ``timeout_s``."""

    name: str
    paths: Tuple[str, ...]
    timeout_s: float


#: The measuring ground truths first, then the jobs' CUDA paths. Six processes: each start (torch, the folders'
#: test modules) costs seconds, so parts group folders; expected times on an H200 are in docs/gpu.md.
PARTS: Tuple[Part, ...] = (
    Part("measuring", ("tests/measuring", "tests/decorators"), 150),
    Part("train-run", ("tests/train", "tests/run"), 200),
    Part("stream-sweep", ("tests/stream", "tests/sweep"), 240),
    Part("compare-transducer", ("tests/compare_models", "tests/transducer"), 180),
    Part("distributed", ("tests/distributed",), 200),
    Part("rest", ("tests",), 90),
)


def cuda_or_why_not() -> Optional[str]:
    """None when torch sees a CUDA device; otherwise why not, in a few words."""
    try:
        import torch
    except Exception as exc:  # the check must say so in one line, whatever the cause
        return f"torch does not import here ({type(exc).__name__}: {exc})"
    if not torch.cuda.is_available():
        return f"no CUDA device here (torch {torch.__version__}: torch.cuda.is_available() is False)"
    return None


def pytest_command(part: Part, junit: Path, parts: Sequence[Part] = PARTS) -> List[str]:
    """The part's pytest command: the CUDA-marked tests of its folders, one process, no doctests, no xdist.

    Example
    -------
    >>> command = pytest_command(PARTS[-1], Path("j.xml"))
    >>> command[command.index("--junitxml=j.xml") + 1:][:3]
    ['tests', '--ignore=tests/measuring', '--ignore=tests/decorators']
    """
    paths = list(part.paths)
    if part.name == "rest":  # every folder the other parts do not cover
        paths += [f"--ignore={p}" for other in parts if other.name != "rest" for p in other.paths]
    return [sys.executable, "-m", "pytest", "-m", "cuda", "-o", "addopts=", "-p", "no:cacheprovider", "-q", "-ra",
            f"--junitxml={junit}", *paths]


def run_part(part: Part, timeout_s: float, junit: Path, log, env: Dict[str, str], root: Path = ROOT,
             parts: Sequence[Part] = PARTS) -> Tuple[str, float]:
    """Run one part in ``root`` (its own process group, killed whole at the timeout); (how it ended, seconds)."""
    start = time.monotonic()
    command = pytest_command(part, junit, parts)
    log.write(f"\n===== part {part.name}: {' '.join(command)} (timeout {timeout_s:.0f} s)\n")
    log.flush()
    proc = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        code = proc.wait(timeout=timeout_s)
        ended = "ran" if code in (0, 1, 5) else f"pytest exited with status {code}"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        ended = f"timed out after {timeout_s:.0f} s"
    return ended, time.monotonic() - start


def nodeid(classname: str, name: str, root: Path = ROOT) -> str:
    """A junit test case's pytest node id (``tests/x/test_y.py::test_z[param]``), its file found under ``root``."""
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if (root / path).is_file() or cut == 1:
            return "::".join([path, *parts[cut:], name])
    return name


def outcomes(junit: Path, root: Path = ROOT) -> List[Tuple[str, str, str]]:
    """(node id, passed|failed|skipped, message) of each test case of a junit file, in order."""
    try:
        root_element = ET.parse(junit).getroot()
    except (OSError, ET.ParseError):  # not written (the part was killed), or cut short
        return []
    rows = []
    for case in root_element.iter("testcase"):
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            child = case.find(tag)
            if child is not None:
                outcome = "skipped" if tag == "skipped" else "failed"
                message = (child.get("message") or child.text or "").strip()
                break
        rows.append((nodeid(case.get("classname", ""), case.get("name", ""), root), outcome, message))
    return rows


def _first_line(text: str) -> str:
    line = next((s.strip() for s in text.splitlines() if s.strip()), "")
    return line[:300]


def part_rows(part: Part, ended: str, cases: Sequence[Tuple[str, str, str]], figures: Sequence[Figure]) -> List[Figure]:
    """The part's rows: each test's recorded figures where it ran, or one row for its outcome."""
    rows: List[Figure] = []
    seen = set()
    for node, outcome, message in cases:
        own = [f for f in figures if f.source == node]
        seen.update(id(f) for f in own)
        rows += own
        label = node.replace("tests/", "", 1)
        if outcome == "skipped":
            rows.append(Figure(label, "-", "-", "skipped", None, note=_first_line(message), source=node))
        elif outcome == "failed" and not any(f.holds is False for f in own):
            rows.append(Figure(label, "-", "-", "failed", False, note=_first_line(message), source=node))
        elif outcome == "passed" and not own:
            rows.append(Figure(label, "passed", "the test's own assertions", "passed", True, source=node))
    rows += [f for f in figures if id(f) not in seen]  # a test stopped before it reported (the part was killed)
    if ended != "ran":
        rows.append(Figure(f"part {part.name}", "-", "-", ended, False,
                           note="its rows above are what it reported before; gpu_check.log has its output"))
    return rows


def keep_reports(folder: Path, out: Path) -> None:
    """The reports the tests kept, one after another, into ``gpu_reports.md``."""
    files = sorted(folder.glob("*.md"))
    if files:
        out.write_text("".join(f"# {f.stem}\n\n{f.read_text()}\n\n" for f in files))


def run_check(outdir: Path, budget_s: float, only: Optional[Sequence[str]], root: Path = ROOT,
              all_parts: Sequence[Part] = PARTS, wheels: Path = gpu_setup.WHEELS) -> int:
    """Install, print versions, run the parts (in ``root``) within ``budget_s``, write and print the table."""
    started = time.monotonic()
    installed, problem = gpu_setup.install_missing(wheels)
    versions = gpu_setup.versions(installed)
    if problem:
        versions["wheels"] = problem
    for key, value in versions.items():
        print(f"{key}: {value}", flush=True)
    outdir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="gpu_check_"))
    reports = scratch / "reports"
    reports.mkdir()
    rows: List[Figure] = []
    parts = [p for p in all_parts if not only or p.name in only]
    with open(outdir / "gpu_check.log", "w") as log:
        for part in parts:
            left = budget_s - (time.monotonic() - started) - 10
            if left < 30:
                rows.append(Figure(f"part {part.name}", "-", "-", "not run", None,
                                   note=f"the check's {budget_s:.0f} s budget was spent"))
                continue
            junit, figures = scratch / f"{part.name}.xml", scratch / f"{part.name}.jsonl"
            env = {**os.environ, FIGURES_ENV: str(figures), REPORTS_ENV: str(reports), "PYTHONUNBUFFERED": "1"}
            ended, took = run_part(part, min(part.timeout_s, left), junit, log, env, root, all_parts)
            rows += part_rows(part, ended, outcomes(junit, root), read_figures(str(figures)))
            print(f"part {part.name}: {ended} in {took:.0f} s", flush=True)
    versions["check"] = f"{len(parts)} part(s), {time.monotonic() - started:.0f} s"
    text = markdown(rows, versions)
    (outdir / "gpu_check.md").write_text("# GPU check\n\n" + text)
    (outdir / "gpu_check.json").write_text(json.dumps(as_json(rows, versions), indent=1))
    keep_reports(reports, outdir / "gpu_reports.md")
    print(text, flush=True)
    failed = any(r.holds is False for r in rows)
    return 1 if failed else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_check.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", type=Path, help="folder for gpu_check.md, gpu_check.json, the log and reports")
    parser.add_argument("--budget_s", type=float, default=560.0, help="the whole check's time limit (s)")
    parser.add_argument("--only", default=None, help="comma-separated parts: " + ",".join(p.name for p in PARTS))
    parser.add_argument("--setup-only", action="store_true",
                        help="install the missing wheels and print the versions, even without a GPU; run nothing")
    parser.error = lambda message: parser.exit(2, f"gpu_check.py: error: {message}\n")  # one line, no usage
    args = parser.parse_args(argv)
    only = args.only.split(",") if args.only else None
    unknown = sorted(set(only or ()) - {p.name for p in PARTS})
    if unknown:
        parser.exit(2, f"gpu_check.py: error: unknown part(s) {', '.join(unknown)}; known: "
                       f"{', '.join(p.name for p in PARTS)}\n")
    if args.setup_only:
        installed, problem = gpu_setup.install_missing()
        for key, value in gpu_setup.versions(installed).items():
            print(f"{key}: {value}")
        if problem:
            print(f"wheels: {problem}")
        return 0
    why = cuda_or_why_not()
    if why is not None:
        print(f"gpu_check: {why}: nothing was checked")
        return 0
    return run_check(args.outdir, args.budget_s, only)


if __name__ == "__main__":
    sys.exit(main())
