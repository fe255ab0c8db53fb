"""The architecture holds: layers point one way, no import cycles, light commands stay light, jobs stay apart.

Layers (docs/architecture.md):
  0 record / statistics: pure, no torch at import;
  1 measuring and I/O: clocks, memory, profiler events, energy, results files, worker processes;
  2 features: the jobs runner, the jobs, renderers, decorators, models, FLOPs, parameters;
  3 the registry of the jobs (sbprof/registry.py, above the job packages) and the command line.
Beside the layers: no job imports another job, the runner imports no job (the registry lists them), the house's
"never" rules hold (PARTS, NEVER), and
renderers import no job and call no statistics (they format a summary analysed before them).
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional, Set

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "sbprof"

LAYERS = {
    0: ("sbprof.base", "sbprof.record", "sbprof.analysis", "sbprof.errors"),  # errors: base's, for one release
    1: ("sbprof.measuring", "sbprof.models", "sbprof.results", "sbprof.workers", "sbprof.cluster"),
    2: ("sbprof.report", "sbprof.jobs", "sbprof.decorators", "sbprof.distributed", "sbprof.sweep", "sbprof.compare_models",
        "sbprof.train", "sbprof.transducer", "sbprof.counts", "sbprof.stream", "sbprof.script"),
    3: ("sbprof.registry", "sbprof.cli", "sbprof.pytest_plugin", "sbprof.__main__"),
}
"""One folder per layer (docs/architecture.md): a module's layer is its top package's."""
from sbprof.registry import PACKAGES  # noqa: E402  # the job packages: the registry's own list

JOBS = tuple(package.__name__ for package in PACKAGES)
"""The job packages (each exports its Job and the registry lists it), none importing another."""
STATISTICS = ("sbprof.analysis", "sbprof.base.stats")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    for layer, prefixes in LAYERS.items():
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return layer
    raise AssertionError(f"{module} is in no layer: add it to LAYERS (and to docs/architecture.md)")


def is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports() -> Dict[str, Set[str]]:
    """sbprof module -> the sbprof modules it imports (at the top or inside functions)."""
    graph: Dict[str, Set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        if name == "sbprof":
            continue  # the package face imports by name on first use (PEP 562), never by statement
        found: Set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sbprof"):
                # "from pkg import submodule" imports the submodule, not what the package face re-exports
                subs = [f"{node.module}.{a.name}" for a in node.names if is_module(f"{node.module}.{a.name}")]
                found.update(subs or [node.module])
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("sbprof"))
        graph[name] = {m for m in found if m != "sbprof"}
    return graph


def test_every_module_is_in_a_layer_and_imports_only_downwards_or_sideways():
    wrong = [f"{m} (layer {layer_of(m)}) imports {t} (layer {layer_of(t)})"
             for m, targets in imports().items() for t in targets if layer_of(t) > layer_of(m)]
    assert not wrong, "\n".join(wrong)


MEASURING = ("sbprof.measuring.timing", "sbprof.measuring.memory", "sbprof.workers", "sbprof.measuring.energy", "sbprof.measuring.events", "sbprof.sweep",
             "sbprof.decorators", "sbprof.measuring.modules")


def job_of(module: str):
    return next((j for j in JOBS if module == j or module.startswith(j + ".")), None)


def test_no_job_imports_another_and_the_runner_imports_none():
    wrong = [f"{m} imports {t}" for m, targets in imports().items() for t in targets
             if job_of(t) and (job_of(m) or m.startswith("sbprof.jobs")) and job_of(m) != job_of(t)]
    assert not wrong, "\n".join(wrong)


def test_renderers_import_no_job_and_call_no_statistics():
    """A renderer may name the summary's types (and tables of definitions), never a function that computes."""
    wrong = []
    for path in (PACKAGE / "report").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sbprof"):
                if job_of(node.module):
                    wrong.append(f"{path.name} imports the job {node.module}")
                if node.module.startswith(STATISTICS):
                    wrong += [f"{path.name} imports {a.name} from {node.module}" for a in node.names
                              if not a.name[:1].isupper()]
    assert not wrong, "\n".join(wrong)


def test_renderers_never_measure_and_measuring_code_never_renders():
    graph = imports()
    for module, targets in graph.items():
        if module.startswith("sbprof.report"):
            wrong = [t for t in targets if t.startswith(MEASURING) or t.endswith((".runner", ".job", ".worker"))]
            assert not wrong, f"renderer {module} imports measuring code {wrong}"
        if module in JOBS:
            continue  # a job package's face lists its parts (plan, analysis, renderer), imported when called
        if module.endswith((".runner", ".job", ".worker")) or module.startswith(MEASURING):
            assert not any(t.startswith("sbprof.report") for t in targets), f"{module} measures and formats"


def find_cycle(graph: Dict[str, Set[str]]) -> Optional[list]:
    """One cycle of ``graph`` (a list of nodes, the first repeated at the end), or ``None``."""
    state: Dict[str, int] = {}

    def visit(node: str, trail: list) -> Optional[list]:
        state[node] = 1
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return trail[trail.index(target):] + [target]
            if target not in state:
                found = visit(target, trail + [target])
                if found:
                    return found
        state[node] = 2
        return None

    return next((c for node in sorted(graph) if node not in state for c in [visit(node, [node])] if c), None)


def test_no_import_cycle():
    cycle = find_cycle(imports())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def package_of(module: str) -> str:
    """The package a module sits in (a package's ``__init__`` is its own package; so is a module at sbprof's top,
    ``sbprof.registry`` or ``sbprof.__main__``, each a part of its own, not of the package face)."""
    path = PACKAGE.parent.joinpath(*module.split("."))
    top = module.count(".") == 1
    return module if (path / "__init__.py").is_file() or top else module.rpartition(".")[0]


def test_no_package_level_import_cycle():
    """Folders point one way too: no two packages import each other, even through different modules."""
    graph: Dict[str, Set[str]] = {}
    for module, targets in imports().items():
        graph.setdefault(package_of(module), set()).update(
            package_of(t) for t in targets if package_of(t) != package_of(module))
    cycle = find_cycle(graph)
    assert cycle is None, "package cycle: " + " -> ".join(cycle)


def _imported_after(code: str) -> Set[str]:
    probe = code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("command", [
    "from sbprof.cli import main\ntry:\n    main(['profile', '--help'])\nexcept SystemExit:\n    pass",
    "from sbprof.cli import main\nmain(['--help'])",
])
def test_help_does_not_import_torch(command):
    assert "torch" not in _imported_after(command)


def test_render_only_does_not_import_torch(tmp_path):
    from sbprof.record import Cell, Measurement
    from sbprof.results.store import ResultStore, Results

    ResultStore(tmp_path, Results("profile")).add(Measurement(
        label="c", cell=Cell(model="m", audio_s=1, batch_size=1), wall_s=[0.1], cpu_s=[0.1], audio_seconds=1.0))
    loaded = _imported_after(f"from sbprof.cli import main\nassert main(['profile', '--render-only', {str(tmp_path)!r}]) == 0")
    assert "torch" not in loaded and (tmp_path / "report.md").is_file()


def test_renderers_neither_read_records_nor_write_files():
    """Renderers format typed summaries and return their files' contents (jobs/render.py writes them): no module
    under sbprof/report/ imports the record package, the results files or the workers (../shared/design/house.json:
    Render never points at Record or Runner)."""
    forbidden = ("sbprof.record", "sbprof.results", "sbprof.workers")
    wrong = [f"{m} imports {t}" for m, targets in imports().items() if m.startswith("sbprof.report")
             for t in targets if t.startswith(forbidden)]
    assert not wrong, "\n".join(wrong)


PARTS = {
    "Face": ("sbprof.cli", "sbprof.__main__"),
    "Registry": ("sbprof.registry",),
    "Jobs": ("sbprof.jobs", "sbprof.workers", "sbprof.results", "sbprof.cluster"),
    "Sweep": ("sbprof.sweep",), "Compare": ("sbprof.compare_models",), "Train": ("sbprof.train",),
    "Transducer": ("sbprof.transducer",), "Stream": ("sbprof.stream",), "Counts": ("sbprof.counts",),
    "Run": ("sbprof.script",),
    "Decorators": ("sbprof.decorators", "sbprof.pytest_plugin", "sbprof.distributed"),
    "Render": ("sbprof.report",), "Analysis": ("sbprof.analysis",), "Measure": ("sbprof.measuring",),
    "Models": ("sbprof.models",), "Record": ("sbprof.record",), "Base": ("sbprof.base", "sbprof.errors"),
}
"""The house's parts (the design the project was built to), each the modules under its folders."""
JOB_PARTS = ("Sweep", "Compare", "Train", "Transducer", "Stream", "Counts", "Run")
NEVER = [
    *[("Render", job, "a renderer formats a Summary, never a job") for job in JOB_PARTS],
    ("Render", "Record", "renderers read the Summary, never a Measurement"),
    ("Render", "Jobs", "renderers return contents; jobs/render.py writes"),
    ("Render", "Measure", "a renderer measures nothing"),
    *[(a, b, "jobs do not import each other") for a in JOB_PARTS for b in JOB_PARTS if a != b],
    ("Analysis", "Measure", "statistics are pure: no torch, no clocks"),
    ("Analysis", "Jobs", "analysis reads results, never files or workers"),
    ("Analysis", "Render", "analysis computes; renderers print"),
    ("Record", "Analysis", "the record sits at the bottom"),
    *[("Measure", job, "measuring knows no job") for job in JOB_PARTS],
    ("Measure", "Analysis", "measuring knows no statistics"),
    ("Measure", "Jobs", "measuring knows no runner"),
    ("Jobs", "Face", "the runner never calls the command line"),
    ("Jobs", "Registry", "the runner reaches a job through its Job object, never by the registry's list"),
    *[(job, "Registry", "a job package is listed by the registry, never reads it") for job in JOB_PARTS],
]
"""Imports that must never be, with why."""


def part_of(module: str) -> Optional[str]:
    return next((part for part, prefixes in PARTS.items()
                 if any(module == p or module.startswith(p + ".") for p in prefixes)), None)


def test_every_module_is_in_a_part_and_every_job_package_of_the_registry_is_a_job_part():
    assert all(part_of(module) for module in imports()), [m for m in imports() if not part_of(m)]
    assert {part_of(job) for job in JOBS} == set(JOB_PARTS)


def test_the_imports_that_must_never_be():
    wrong = [f"{m} imports {t}: {why}" for m, targets in imports().items() for t in targets
             for a, b, why in NEVER if part_of(m) == a and part_of(t) == b]
    assert not wrong, "\n".join(wrong)
