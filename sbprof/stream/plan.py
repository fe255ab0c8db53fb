"""The stream job's plan: per setting, the offline call, the latency grid and the capacity search, in one worker.

Per (device, thread count) setting, one fresh worker process
(:mod:`sbprof.stream.worker`) measures, in a new order each pass, the
setting's cells: ``offline`` (the utterance in one call), one ``latency``
cell per chunk size x left context x stream count, and ``capacity`` (the
search, one record holding its probes). A cell's coordinates are a
:class:`~sbprof.record.Cell` whose ``params`` say its kind and values, so a
rerun measures only what is missing (:func:`sbprof.jobs.plan.interleaved_passes`).
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Any, Iterator, List

from sbprof.models.audio import input_kind
from sbprof.jobs.plan import (Batch, Group, Item, JobPlan, Step, StoreView, interleaved_passes, log_name,
                              models_header, repeat_policy, worker_env)
from sbprof.jobs.preamble import Setting
from sbprof.record import Cell
from sbprof.record.results import Results
from sbprof.stream.config import StreamConfig
from sbprof.stream import JOB


def left_text(left: int) -> str:
    """``left 4`` / ``left unlimited`` (-1).

    Example
    -------
    >>> left_text(-1), left_text(2)
    ('left unlimited', 'left 2')
    """
    return "left unlimited" if left == -1 else f"left {left}"


def utterance_seconds(cfg: StreamConfig) -> float:
    """How long the utterance every stream sends is: ``audio_s``, or the recording's own length."""
    if cfg.streaming.audio_s is not None:
        return cfg.streaming.audio_s
    import soundfile

    info = soundfile.info(cfg.streaming.audio)
    return info.frames / info.samplerate


class Plan(JobPlan):
    """The stream job's plan (see the module docstring and :class:`sbprof.jobs.plan.Plan`)."""

    job, worker = JOB.name, "sbprof.stream.worker"  # the name its Job gives

    def __init__(self, cfg: StreamConfig):
        super().__init__(cfg)
        s = cfg.streaming
        self.input = input_kind(s.audio, self.pre.seed)
        self.audio_s = utterance_seconds(cfg)
        self.settings = {"interface": cfg.model.type, "warmup_chunks": self.pre.warmup,
                         "passes": self.pre.measured, "repeats": asdict(self.pre.repeats)}

    def header(self) -> Results:
        src = self.cfg.model
        rules = {"input": self.input, "utterance_s": self.audio_s, "warmup": self.pre.warmup,
                 "measured": self.pre.measured, "max_backlog_s": self.cfg.streaming.max_backlog_s,
                 "pacing": "real time, one queue", "traffic": self.cfg.streaming.traffic,
                 "alignment": self.cfg.streaming.alignment is not None}
        return self.results(rules, models_header({src.name: src}))

    def cell(self, setting: Setting, **params: Any) -> Cell:
        return Cell(model=self.cfg.model.name, device=setting.device, threads=setting.threads, audio_s=self.audio_s,
                    input=self.input, params=params)

    def cells(self, setting: Setting) -> List[Cell]:
        """Every cell of one setting in a complete run."""
        s, cap = self.cfg.streaming, self.cfg.capacity
        out = [self.cell(setting, kind="offline")] if self.cfg.offline else []
        out += [self.cell(setting, kind="latency", chunk_size=c, left_context_chunks=left, streams=n)
                for c in s.chunk_sizes for left in s.left_context_chunks for n in s.streams]
        if cap is not None:
            out += [self.cell(setting, kind="capacity", chunk_size=c, left_context_chunks=left,
                              max_streams=cap.max_streams, p99_delay_ms=cap.p99_delay_ms)
                    for c in cap.chunk_size for left in cap.left_context_chunks]
        return out

    def expected(self) -> int:
        return self.pre.repeats.first_pass * sum(len(self.cells(s)) for s in self.pre.settings)

    @staticmethod
    def label(cell: Cell) -> str:
        """``chunk 16, left 2, 4 streams`` / ``offline`` / ``capacity, chunk 16, left 2``."""
        p = cell.params
        if p["kind"] == "offline":
            return "offline"
        text = f"chunk {p['chunk_size']}, {left_text(p['left_context_chunks'])}"
        if p["kind"] == "capacity":
            return f"capacity, {text}"
        return f"{text}, {p['streams']} stream{'s' if p['streams'] > 1 else ''}"

    def batch(self, setting: Setting, cells: List[Cell]) -> Batch:
        payload = self.payload(setting)
        items = [Item(c, self.label(c), {"settings": self.settings}) for c in cells]
        return Batch(name=f"stream worker for {setting.name}", module=self.worker, payload=payload, items=items,
                     log=log_name(setting.name), env=worker_env(setting.threads))

    def steps(self, view: StoreView) -> Iterator[Step]:
        from sbprof.analysis.stream_validation import check_stream_record

        for m in view.records():  # a hand-edited record is refused before anything is measured
            check_stream_record(m)
        groups = [Group(self.cells(s), lambda chosen, s=s: self.batch(s, chosen)) for s in self.pre.settings]
        yield from interleaved_passes(view, lambda: groups, repeat_policy(self.pre.repeats), self.pre.seed)
