"""The one record type that crosses module boundaries, and its parts.

A :class:`Measurement` keeps raw samples; statistics are derived on read
(never cached), so a saved result can be re-summarised and re-rendered
without measuring again. Every part round-trips through JSON
(``to_dict``/``from_dict``), checked field by field when read
(:mod:`sbprof.record.check`); a record or file of an earlier version is
migrated on read, one of a newer sbprof refused (:mod:`sbprof.record.migrate`). :class:`Results`
is a results file's content: the job, its rules, models and machine, and its records.
"""
from sbprof.record.cell import Cell
from sbprof.record.measurement import (SCHEMA_VERSION, STATUSES, Counts, Energy, Env, Measurement, MemoryPeak)
from sbprof.record.results import Results

__all__ = ["Cell", "Counts", "Energy", "Env", "Measurement", "MemoryPeak", "Results", "SCHEMA_VERSION", "STATUSES"]
