"""Every job sbprof runs, as a registration: a name, its configuration, its plan, its analysis and its renderers.

A job is a package (its config schema and validation, its plan of cells,
its worker) plus one :class:`JobEntry` in :data:`JOBS`. The one runner
(:mod:`sbprof.jobs.runner`), the one command line (:mod:`sbprof.cli.job`)
and ``--render-only`` (:mod:`sbprof.jobs.render`) do the rest for every job
alike. Entries name their parts as ``"module:attribute"`` strings, imported
only when the job runs: ``import sbprof`` and ``sbprof --help`` stay light,
and this table imports no job (jobs never import each other).

The path one cell takes: the YAML -> ``config`` (the shared preamble and the
job's keys, checked) -> ``plan`` (cells, each a typed
:class:`~sbprof.record.Cell`, grouped into worker batches) -> the runner ->
a fresh worker process (the job's worker module: one cell -> one
:class:`~sbprof.record.Measurement`) -> ``results.json`` (saved at once) ->
``analyse`` (one summary object: grouped runs, intervals, predictions...)
-> ``render`` (markdown, CSV, plots: they only format that summary).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Dict, Optional

from sbprof.base.checks import nearest
from sbprof.base.errors import ConfigError


@dataclass(frozen=True)
class JobEntry:
    """One job (see the module docstring); its parts are found by convention.

    Arguments
    ---------
    name : str
        The subcommand (``sbprof NAME``) and the ``job`` of its ``results.json``.
    help : str
        One line for ``sbprof --help``.
    package : str
        The job's package: ``config`` (``SCHEMA``, ``load_config(path, overrides, run_options)``) and
        ``plan`` (``Plan(config)``, see :class:`sbprof.jobs.plan.Plan`).
    summary : str
        Names ``sbprof.analysis.<summary>`` (``analyse(results) -> summary``) and ``sbprof.report.<summary>``
        (``render(summary) -> {file name: content}``, written by :mod:`sbprof.jobs.render`).
    derive, summarise : str, optional
        ``derive(record)``: figures written beside each record of ``results.json``; ``summarise(results)``: its
        ``summary`` block.
    command_line : str, optional
        ``parse(argv, prog) -> config`` for a job whose command line is not ``CONFIG.yaml [--key value]``.
    show : str, optional
        ``show(config, outcome)``: what the command prints after the run (e.g. a short report).
    noun : str
        What the job's cells are, in its closing line (``cell``, ``point``...).
    ranks : str, optional
        ``run_rank(config) -> exit code``: what one process does when the job runs under torchrun
        (``RANK`` and ``WORLD_SIZE`` set): it is one rank of the job, measuring in place.
    """

    name: str
    help: str
    package: str
    summary: str
    derive: Optional[str] = None
    summarise: Optional[str] = None
    command_line: Optional[str] = None
    show: Optional[str] = None
    noun: str = "cell"
    ranks: Optional[str] = None

    def load(self, part: str) -> Any:
        """The object one of the entry's parts names (imported now): ``config``, ``schema``, ``plan``,
        ``analyse``, ``render``, or an optional part (``None`` when the job has none)."""
        conventions = {"plan": f"{self.package}.plan:Plan", "analyse": f"sbprof.analysis.{self.summary}:analyse",
                       "render": f"sbprof.report.{self.summary}:render"}
        if not self.command_line:
            conventions.update(config=f"{self.package}.config:load_config", schema=f"{self.package}.config:SCHEMA")
        value = conventions.get(part, getattr(self, part, None))
        if value is None:
            return None
        module, _, attribute = value.partition(":")
        return getattr(importlib.import_module(module), attribute)


SHOW_REPORT = "sbprof.cli.job:show_report"
CELL_FIGURES = "sbprof.analysis.figures:cell_figures"
JOBS: Dict[str, JobEntry] = {entry.name: entry for entry in (
    JobEntry("run", "profile a SpeechBrain recipe or PyTorch script as it runs, without editing it", "sbprof.script",
             "run", command_line="sbprof.cli.run:parse", noun="stage"),
    JobEntry("profile", "profiling sweep of a pretrained model: RTF and memory tables", "sbprof.sweep", "sweep",
             derive=CELL_FIGURES, summarise="sbprof.analysis.sweep:summary_block"),
    JobEntry("compare-models", "models or variants over a varied size: latency, RTFx, memory, energy, plots",
             "sbprof.compare", "comparison", derive=CELL_FIGURES, noun="point"),
    JobEntry("train", "training-loop profile: step time, memory, FLOPs, per-module breakdown; DDP scale-out",
             "sbprof.train", "train", derive="sbprof.analysis.train:train_figures", show=SHOW_REPORT,
             ranks="sbprof.train.rank:run_rank"),
    JobEntry("transducer", "RNN-T loss backends: agreement, step time and memory side by side", "sbprof.transducer",
             "transducer", show=SHOW_REPORT),
    JobEntry("stream", "streaming ASR chunk by chunk: latency percentiles, real-time margin, streams per machine",
             "sbprof.stream", "stream"),
) + tuple(
    JobEntry(command, text, "sbprof.counts", "counts", command_line="sbprof.cli.counts:parse",
             show="sbprof.cli.counts:show", noun="model")
    for command, text in (("flops", "FLOPs and MACs of a model's forward (and backward), per module"),
                          ("params", "parameter counts of a model: total, trainable, per submodule"),
                          ("modules", "per-module time of a model's forward and backward (and memory)")))}


def get_job(name: str) -> JobEntry:
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
