"""One :class:`Job` per job: every part of it referenced directly, exported by its package, listed by the registry.

A job package (``sweep/``, ``train/``...) exports ``JOB`` (the counts
package exports ``JOBS``, one per command); :mod:`sbprof.registry`
lists the packages and derives ``name -> Job``. Parts whose module imports
torch or matplotlib are named by module and attribute and imported when
called (:class:`Lazy`), so listing the jobs (``sbprof --help``) stays light;
the tests resolve every such part of every job.

The path one cell takes: the YAML (or the job's own command line) ->
``load_config`` -> ``plan`` (cells, grouped into worker batches) -> the
runner -> ``results.json`` -> ``analyse`` (one summary) -> ``render``
(``{file name: content}``, written by :mod:`sbprof.jobs.render`).
"""
from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, NoReturn, Optional, Sequence

from sbprof.base.errors import ConfigError


@dataclass(frozen=True)
class Invocation:
    """What a job's command line asks: run on ``source`` (a YAML path, or the job's options as a mapping) with
    key ``overrides`` and run ``options``, or re-render the saved folder ``render_only``.

    Example
    -------
    >>> Invocation(render_only="results/x").render_only
    'results/x'
    """

    source: Any = None
    overrides: Dict[str, Any] = field(default_factory=dict)
    options: Dict[str, Any] = field(default_factory=dict)
    render_only: Optional[str] = None


@dataclass(frozen=True)
class Job:
    """One job: its name, its words, and the callables that do its work.

    Arguments
    ---------
    name : str
        The subcommand (``sbprof NAME``) and the ``job`` of its ``results.json``.
    help : str
        One line for ``sbprof --help``.
    load_config : callable
        ``load_config(source, overrides, run_options) -> config``: a checked configuration (``ConfigError``
        otherwise) from a YAML path, or for a job with its own command line from its options as a mapping;
        what :func:`sbprof.run` calls.
    plan : callable
        ``plan(config)``: the cells to measure (:class:`sbprof.jobs.plan.Plan`).
    analyse : callable
        ``analyse(results) -> summary`` (:mod:`sbprof.analysis`).
    render : callable
        ``render(summary) -> {file name: content}`` (:mod:`sbprof.report`), written by :mod:`sbprof.jobs.render`.
    config_keys : callable, optional
        ``config_keys() -> keys``: the YAML's top-level keys, each overridable as ``--key value``; for the jobs
        run as ``sbprof NAME CONFIG.yaml``.
    parse : callable, optional
        ``parse(argv, prog) -> Invocation``: the job's own command line (``sbprof flops TARGET ...``), instead of
        ``CONFIG.yaml [--key value]``.
    derive, summarise : callable, optional
        ``derive(record)``: figures written beside each record of ``results.json``; ``summarise(summary)``: its
        ``summary`` block, from the job's analysis (``analyse``'s summary, the one its reports show).
    show : callable, optional
        ``show(config, outcome) -> text``: what the command prints after the run (e.g. a short report).
    run_rank : callable, optional
        ``run_rank(config) -> exit code``: what one process does when the job runs under torchrun (``RANK`` and
        ``WORLD_SIZE`` set): it is one rank of the job, measuring in place.
    noun : str
        What the job's cells are, in its closing line (``cell``, ``point``...).
    resumes : bool
        Whether the same command run again goes on where a run stopped (every job's runner resumes, but
        ``sbprof run``'s script runs once): the advice after a full disk, and whether a folder holding a run
        is refused.
    """

    name: str
    help: str
    load_config: Callable[[Any, Optional[Mapping[str, Any]], Mapping[str, Any]], Any]
    plan: Callable[[Any], Any]
    analyse: Callable[[Any], Any]
    render: Callable[..., Any]
    config_keys: Optional[Callable[[], Sequence[str]]] = None
    parse: Optional[Callable[[List[str], str], Invocation]] = None
    derive: Optional[Callable[[Any], Dict[str, Any]]] = None
    summarise: Optional[Callable[[Any], Dict[str, Any]]] = None
    show: Optional[Callable[[Any, Any], Optional[str]]] = None  # (config, runner's Outcome)
    run_rank: Optional[Callable[[Any], int]] = None
    noun: str = "cell"
    resumes: bool = True

    def __post_init__(self) -> None:
        if (self.config_keys is None) == (self.parse is None):
            raise TypeError(f"job {self.name!r}: give config_keys (a YAML job) or parse (its own command line)")


class Lazy:
    """A part whose module is heavy (torch, SpeechBrain, matplotlib): the callable ``name`` of ``module``, imported
    on the first call (so ``sbprof --help`` and ``import sbprof`` stay light). :attr:`target` imports it now.

    Example
    -------
    >>> nearest = Lazy("sbprof.base.checks", "nearest")
    >>> nearest("profle", ["profile"])
    " (did you mean 'profile'?)"
    """

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    @property
    def target(self) -> Any:
        return getattr(importlib.import_module(self.module), self.name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.target(*args, **kwargs)


def schema_keys(module: str) -> Callable[[], List[str]]:
    """A YAML job's ``config_keys``: the top-level keys of ``module``'s ``SCHEMA``, imported when asked.

    Example
    -------
    >>> schema_keys("sbprof.jobs.preamble")()[:2]
    ['devices', 'cpu_threads']
    """
    return lambda: list(Lazy(module, "SCHEMA").target)


class ArgumentParser(argparse.ArgumentParser):
    """The one argparse of every sbprof command line (the jobs', ``merge`` and ``gate``): a usage mistake is a
    :class:`ConfigError` naming the command (the command line prints it as one line, exit code 2); ``--help``
    still prints the usage.

    Example
    -------
    >>> ArgumentParser(prog="sbprof flops").parse_args(["--nope"])
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: sbprof flops: unrecognized arguments: --nope (see --help)
    """

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{self.prog}: {message} (see --help)")


def written_report(config: Any, outcome: Any) -> Optional[str]:
    """The ``report.md`` the run's renderer wrote (a job's ``show`` when its report is short enough for a
    terminal); ``None`` when none was written."""
    path = outcome.outputs.get("report.md")
    return Path(path).read_text() if path is not None and Path(path).is_file() else None
