"""The registry: one Job per job, exported by its package, every part a callable; a new job is one line."""
from __future__ import annotations

import inspect

import pytest

from sbprof.jobs import registry
from sbprof.jobs.job import Job

PARTS = ("load_config", "plan", "analyse", "render")
OPTIONAL = ("config_keys", "parse", "derive", "summarise", "show", "run_rank")


@pytest.mark.parametrize("name", list(registry.JOBS))
def test_every_part_of_every_job_is_a_callable(name):
    job = registry.JOBS[name]
    assert isinstance(job, Job) and job.name == name and job.help
    assert all(callable(getattr(job, part)) for part in PARTS)
    assert all(getattr(job, part) is None or callable(getattr(job, part)) for part in OPTIONAL)
    assert (job.config_keys is None) != (job.parse is None)
    assert list(inspect.signature(job.analyse).parameters)  # the real function's, through a lazy part too


def test_every_job_comes_from_a_listed_package():
    listed = [job for package in registry.PACKAGES for job in package.JOBS]
    assert [job.name for job in listed] == list(registry.JOBS)
    assert len({package.__name__ for package in registry.PACKAGES}) == len(registry.PACKAGES)


def test_a_job_takes_a_yaml_or_a_command_line_of_its_own():
    with pytest.raises(TypeError, match="give config_keys"):
        Job("x", "x", load_config=dict, plan=dict, analyse=dict, render=dict)
