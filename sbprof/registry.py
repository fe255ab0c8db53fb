"""Every job sbprof runs, listed once, and what needs a job by name: :func:`run` and :func:`render_only`.

Each job package exports its :class:`~sbprof.jobs.job.Job` in ``JOBS`` (the
counts package holds three, one per command) and :data:`PACKAGES` lists the
packages, one line each; ``name -> Job`` is derived. A new job is one package plus one
line here. The one runner (:mod:`sbprof.jobs.runner`), the one command line
(:mod:`sbprof.cli.job`) and ``--render-only`` do the rest for every job alike.

This module sits above the job packages and :mod:`sbprof.jobs` (they never
import it; it imports them; only the command line and :mod:`sbprof`'s face
import it), so no folder imports another that imports it back
(``tests/test_layers.py`` checks it, and takes its list of job packages from here).

Example
-------
>>> [job.name for job in JOBS.values()][:3]
['run', 'profile', 'compare-models']
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Union

from sbprof import compare_models, counts, script, stream, sweep, train, transducer
from sbprof.base.checks import nearest
from sbprof.base.errors import ConfigError
from sbprof.jobs.job import Job

PACKAGES = (
    script,
    sweep,
    compare_models,
    train,
    transducer,
    stream,
    counts,
)
"""Every job package, in the order ``sbprof --help`` lists their jobs."""
JOBS: Dict[str, Job] = {job.name: job for package in PACKAGES for job in package.JOBS}


def get_job(name: str) -> Job:
    """The registered job ``name``; :class:`ConfigError` with the nearest name otherwise.

    Example
    -------
    >>> get_job("profile").name
    'profile'
    >>> get_job("profle")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: no job named 'profle' (did you mean 'profile'?)...
    """
    if name not in JOBS:
        raise ConfigError(f"no job named {name!r}{nearest(name, list(JOBS))}; jobs: {', '.join(JOBS)}")
    return JOBS[name]


def run(job: str, config: Any, overrides: Optional[Dict[str, Any]] = None, log: Callable[[str], None] = print,
        **run_options: Any) -> Any:
    """Run the registered job ``job``: ``sbprof JOB CONFIG.yaml`` from Python; the run's
    :class:`~sbprof.jobs.outcome.Outcome`.

    ``config`` is the YAML file, or for a job with its own command line its options as a mapping
    (``run("flops", {"target": "model.yaml", "input": "[4, 16]"})``); ``overrides`` replace keys of it (nested
    mappings merged), ``run_options`` are the command line's (``device``, ``noprogressbar``, ``retry_failed``).

    Example
    -------
    >>> run("profile", "no_such.yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: no_such.yaml: no such configuration file
    """
    from sbprof.jobs.preamble import check_run_options
    from sbprof.jobs.runner import run_config

    entry = get_job(job)
    check_run_options(run_options)
    return run_config(entry, entry.load_config(config, overrides, run_options), log=log)


def render_only(target: Union[str, Path], job: Optional[str] = None) -> Dict[str, Path]:
    """Re-render a saved ``results.json`` (or its folder) next to it, measuring nothing.

    Arguments
    ---------
    target : str or Path
        A results folder or its ``results.json``.
    job : str, optional
        The command asking (``profile``...): a folder of another job is refused, naming the right command.
        ``None``: whatever job wrote the folder.

    Raises
    ------
    ConfigError
        Not a results folder, a file of another job, an unknown job or a newer format.
    StorageError
        The reports could not be written.
    """
    from sbprof.jobs.render import reports
    from sbprof.results import RESULTS_FILE, load_results

    path = Path(target)
    if not os.path.lexists(path):  # a link loop or a dangling link goes on, to be named by load_results
        raise ConfigError(f"{target}: no such results folder or file")
    from sbprof.jobs.cluster import MACHINES_DIR, is_cluster_folder, render_cluster_folder

    if is_cluster_folder(path):  # a run on a cluster's machine types: each type's reports, then theirs together
        outputs: Dict[str, Path] = {}
        for folder in sorted(p for p in (path / MACHINES_DIR).iterdir() if (p / RESULTS_FILE).is_file()):
            outputs.update({f"{folder.name}/{k}": v for k, v in render_only(folder, job).items()})
        return {**outputs, **render_cluster_folder(path, job)}
    results = load_results(path, job=job)
    try:
        entry = get_job(results.job)
    except ConfigError:
        raise ConfigError(f"{path if path.is_file() else path / RESULTS_FILE}: written by an unknown job "
                          f"{results.job!r}; this sbprof renders jobs of its own only") from None
    return reports(entry, results, path if path.is_dir() else path.parent)
