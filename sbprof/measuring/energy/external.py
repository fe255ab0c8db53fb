"""Attach an external power meter's log to a run's time window.

Any logger that writes a CSV of timestamped power samples will do: a
wall-plug meter with a USB or network log, a script that samples a smart
plug, or a loop that records a software estimate such as powertop's (which
is then the meter's accuracy, not sbprof's). The CSV needs a header row, a
timestamp column (seconds since the Unix epoch, or an ISO 8601 time; a time
without a zone is read as local time) and a watts column.

Integration rule: trapezoids between consecutive samples; at each edge of
the window the power is interpolated linearly between the two samples that
surround it, so a piecewise-linear power is integrated exactly. The window
must lie within the logged span: nothing is extrapolated, a window that
starts before the first sample or ends after the last is refused.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import replace
from datetime import datetime
from typing import List, Sequence, Tuple

import numpy as np

from sbprof.base.errors import ConfigError, MeasurementError
from sbprof.base.inputfiles import read_input_file
from sbprof.record.measurement import Energy

PowerSamples = List[Tuple[float, float]]


def _parse_time(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return datetime.fromisoformat(text.strip()).timestamp()


MAX_LOG_BYTES = 256 * 2**20
"""Power logs larger than this are refused unread (a day at 10 samples a second is a few tens of MiB)."""
MAX_WATTS = 1e9
"""No meter reads more (a gigawatt): a larger figure is damage, never a measurement."""


def load_power_csv(
    path: str, time_column: str = "timestamp", watts_column: str = "watts", clock_offset_s: float = 0.0
) -> PowerSamples:
    """Read ``(unix seconds, watts)`` samples from a meter's CSV log, sorted by time.

    ``clock_offset_s`` is added to every timestamp, for a meter whose clock
    runs ahead of (negative) or behind (positive) this machine's. The log is
    data: read as CSV text only (a regular file, never a FIFO that would block,
    up to :data:`MAX_LOG_BYTES`), each time and power a finite number, the power
    from 0 to :data:`MAX_WATTS`.
    """
    raw = read_input_file(path, MAX_LOG_BYTES, "power log")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not a power log: not UTF-8 text (byte at position {exc.start})") from None
    samples: PowerSamples = []
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        missing = [c for c in (time_column, watts_column) if c not in (reader.fieldnames or [])]
        if missing:
            raise ConfigError(f"{path}: no column {missing}; columns are {reader.fieldnames}")
        for line, row in enumerate(reader, start=2):
            try:
                time_s, watts = _parse_time(row[time_column]) + clock_offset_s, float(row[watts_column])
            except (TypeError, ValueError, OverflowError) as err:
                raise ConfigError(f"{path}, line {line}: cannot read a sample ({err})") from None
            if not (math.isfinite(time_s) and math.isfinite(watts) and 0 <= watts <= MAX_WATTS):
                raise ConfigError(f"{path}, line {line}: a sample must be a finite time and a power from 0 to "
                                  f"{MAX_WATTS:g} W, got {row[time_column]!r}, {row[watts_column]!r}")
            samples.append((time_s, watts))
    except csv.Error as err:
        raise ConfigError(f"{path}: not a CSV power log ({err})") from None
    return sorted(samples)


def integrate_power(samples: Sequence[Tuple[float, float]], start_s: float, end_s: float) -> float:
    """Joules between ``start_s`` and ``end_s`` from power samples (see the module rule).

    Example
    -------
    >>> integrate_power([(0.0, 10.0), (1.0, 20.0), (2.0, 20.0)], 0.5, 2.0)   # (15 + 20) / 2 * 0.5 + 20 * 1
    28.75
    """
    if not end_s > start_s:
        raise ConfigError(f"the window must end after it starts, got {start_s} .. {end_s}")
    pts = sorted(samples)
    if len(pts) < 2:
        raise MeasurementError("a power log needs at least two samples")
    t = np.array([p[0] for p in pts], dtype=float)
    w = np.array([p[1] for p in pts], dtype=float)
    if np.any(np.diff(t) <= 0) or not (np.all(np.isfinite(t)) and np.all(np.isfinite(w))):
        raise ConfigError("power samples need distinct, finite timestamps and finite watts")
    if start_s < t[0] or end_s > t[-1]:
        raise MeasurementError(
            f"the meter log covers {t[0]:.3f} .. {t[-1]:.3f} s but the window is {start_s:.3f} .. {end_s:.3f} s: "
            "the meter did not record all of it (check the clocks; see clock_offset_s)"
        )
    inside = (t > start_s) & (t < end_s)
    tt = np.concatenate([[start_s], t[inside], [end_s]])
    ww = np.concatenate([[np.interp(start_s, t, w)], w[inside], [np.interp(end_s, t, w)]])
    return float(np.sum((ww[1:] + ww[:-1]) * np.diff(tt)) / 2)


def attach_meter(result: Energy, samples: Sequence[Tuple[float, float]]) -> Energy:
    """A copy of ``result`` with the meter's energy over its window added as domain ``"meter"``.

    Example
    -------
    >>> run = Energy(duration_s=2.0, start_unix_s=100.0, end_unix_s=102.0)
    >>> with_meter = attach_meter(run, [(99.0, 50.0), (103.0, 50.0)])
    >>> with_meter.joules, with_meter.watts()
    ({'meter': 100.0}, {'meter': 50.0})
    """
    joules = integrate_power(samples, result.start_unix_s, result.end_unix_s)
    return replace(result, joules={**result.joules, "meter": joules}, sources={**result.sources, "meter": "meter"},
                   unavailable=dict(result.unavailable))
