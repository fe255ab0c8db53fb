"""The registry: one Job per job, exported by its package, every part a callable; a new job is one line."""
from __future__ import annotations

import inspect
from dataclasses import dataclass

import pytest

from sbprof import registry
from sbprof.jobs.job import Job, Lazy, written_report
from sbprof.jobs.plan import Records
from sbprof.jobs.preamble import SCHEMA as PREAMBLE, Defaults, Preamble, check_preamble, load_tree
from sbprof.record import Cell, Measurement, Results
from sbprof.results import load_results
from sbprof.script import VARY

PARTS = ("load_config", "plan", "analyse", "render")
OPTIONAL = ("config_keys", "parse", "derive", "summarise", "show", "run_rank")


@pytest.mark.parametrize("job", [*registry.JOBS.values(), VARY], ids=lambda job: job.name)
def test_every_plan_takes_its_name_from_its_job(job):
    plan = job.plan.target if isinstance(job.plan, Lazy) else job.plan
    if not inspect.isclass(plan):  # counts: one plan for three Jobs, named by the command its config holds
        assert job.name in ("flops", "params", "modules")
        return
    # Written once, in the Job: the plan (the results header's job) reads it from there, never repeats it.
    assert plan.job == job.name and 'job = "' not in inspect.getsource(plan)


@pytest.mark.parametrize("name", list(registry.JOBS))
def test_every_part_of_every_job_is_a_callable(name):
    job = registry.JOBS[name]
    assert isinstance(job, Job) and job.name == name and job.help
    assert all(callable(getattr(job, part)) for part in PARTS)
    assert all(getattr(job, part) is None or callable(getattr(job, part)) for part in OPTIONAL)
    assert (job.config_keys is None) != (job.parse is None)
    analyse = job.analyse.target if isinstance(job.analyse, Lazy) else job.analyse
    assert list(inspect.signature(analyse).parameters) == ["results"]


@pytest.mark.parametrize("name", list(registry.JOBS))
def test_every_lazy_part_names_a_callable_that_imports(name):
    job = registry.JOBS[name]
    lazy = [getattr(job, part) for part in PARTS + OPTIONAL if isinstance(getattr(job, part), Lazy)]
    assert all(callable(part.target) for part in lazy)
    if job.config_keys is not None:
        assert "output_folder" in job.config_keys()


def test_every_job_comes_from_a_listed_package():
    listed = [job for package in registry.PACKAGES for job in package.JOBS]
    assert [job.name for job in listed] == list(registry.JOBS)
    assert len({package.__name__ for package in registry.PACKAGES}) == len(registry.PACKAGES)


def test_a_job_takes_a_yaml_or_a_command_line_of_its_own():
    with pytest.raises(TypeError, match="give config_keys"):
        Job("x", "x", load_config=dict, plan=dict, analyse=dict, render=dict)


@dataclass(frozen=True)
class EchoConfig:
    preamble: Preamble
    value: float


def load_echo(path, overrides=None, run_options=None) -> EchoConfig:
    tree = load_tree(path, overrides, {**PREAMBLE, "value": None})
    defaults = Defaults(warmup=0, measured=1, output_folder="results/echo")
    return EchoConfig(check_preamble(tree, str(path), run_options, defaults), float(tree.get("value", 1.0)))


class EchoPlan:
    """One record, made without a worker: its one time is the configuration's value."""

    def __init__(self, cfg: EchoConfig):
        self.cfg = cfg

    def header(self) -> Results:
        return Results("echo", rules={"value": self.cfg.value})

    def expected(self) -> int:
        return 1

    def steps(self, view):
        yield Records([Measurement(label="echo", cell=Cell(model="echo"), wall_s=[self.cfg.value],
                                   cpu_s=[self.cfg.value])])


ECHO = Job("echo", "a job made in a test", load_config=load_echo, config_keys=lambda: ["value", *PREAMBLE],
           plan=EchoPlan, analyse=lambda results: [m.wall_s[0] for m in results.records],
           render=lambda summary: {"report.md": f"# echo\n\ntimes: {summary}\n"}, show=written_report)


def test_a_new_job_is_one_line_and_runs_end_to_end(tmp_path, monkeypatch, capsys):
    from sbprof.cli import main

    monkeypatch.setitem(registry.JOBS, ECHO.name, ECHO)  # what its package's line in registry.PACKAGES does
    out = tmp_path / "out"
    config = tmp_path / "echo.yaml"
    config.write_text(f"value: 0.25\ndevices: cpu\ncpu_threads: 1\noutput_folder: {out}\n")
    assert main(["--help"]) == 0 and "  echo " in capsys.readouterr().out
    assert main(["echo", str(config), "--value", "0.5", "--noprogressbar"]) == 0
    printed = capsys.readouterr().out
    assert "times: [0.5]" in printed and f"report.md: {out / 'report.md'}" in printed
    (record,) = load_results(out).records
    assert record.wall_s == [0.5]
    (out / "report.md").unlink()
    assert main(["echo", "--render-only", str(out)]) == 0
    assert (out / "report.md").read_text() == "# echo\n\ntimes: [0.5]\n"
    assert main(["echo", str(config), "--valeu", "1"]) == 2
    assert "unknown option --valeu (did you mean 'value'?)" in capsys.readouterr().err


def test_the_runner_analyses_once_and_hands_that_summary_to_results_json_and_the_report(tmp_path, monkeypatch):
    """One analysis at the end's checkpoint (the echo job's one step saves its record without a worker batch), its
    summary both results.json's summary block and the report; ``--render-only`` analyses once more, alone."""
    import json
    from dataclasses import replace

    calls = []

    def analyse(results):
        calls.append(len(results.records))
        return [m.wall_s[0] for m in results.records]

    monkeypatch.setitem(registry.JOBS, ECHO.name, replace(ECHO, analyse=analyse, summarise=lambda s: {"times": s}))
    out = tmp_path / "out"
    config = tmp_path / "echo.yaml"
    config.write_text(f"value: 0.25\ndevices: cpu\ncpu_threads: 1\noutput_folder: {out}\n")
    registry.run("echo", str(config), log=lambda line: None, noprogressbar=True)
    assert calls == [1]
    assert json.loads((out / "results.json").read_text())["summary"] == {"times": [0.25]}
    assert (out / "report.md").read_text() == "# echo\n\ntimes: [0.25]\n"
    calls.clear()
    registry.render_only(out)
    assert calls == [1]
