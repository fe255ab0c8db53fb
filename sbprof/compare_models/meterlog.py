"""An external power meter's log attached to every measured point of a comparison.

Each point's record holds its energy window on the wall clock
(``Energy.start_unix_s`` .. ``end_unix_s``, the ``samples + 1`` calls of the
point). A meter that logged (timestamp, watts) through the run is integrated
over each window (:func:`sbprof.measuring.energy.external.integrate_power`) and added
as the domain ``meter``. A wall-plug meter sees the whole machine: idle
power and other processes included, so its joules per inference are an
upper bound for the model alone.
"""
from __future__ import annotations

from dataclasses import replace
from typing import List, Sequence, Tuple

from sbprof.compare_models.schema import EnergyConfig
from sbprof.measuring.energy.external import attach_meter, load_power_csv
from sbprof.base.errors import MeasurementError
from sbprof.record import Measurement


def attach_meter_log(records: Sequence[Measurement], energy: EnergyConfig) -> Tuple[List[Measurement], List[str]]:
    """Copies of the measured records with the meter's energy added, and one line per window it does not cover.

    Arguments
    ---------
    records : sequence of Measurement
        Records of a comparison; those without an energy window are left out.
    energy : EnergyConfig
        Names the log (``meter_log``), its columns and its clock offset.

    Returns
    -------
    (updated records, problems)

    Example
    -------
    >>> import tempfile, pathlib
    >>> from sbprof.record import Energy
    >>> log = pathlib.Path(tempfile.mkdtemp()) / "power.csv"
    >>> _ = log.write_text("timestamp,watts\\n100,40\\n110,40\\n")
    >>> inside = Measurement(label="a", energy=Energy(2.0, 101.0, 103.0, calls=4))
    >>> outside = Measurement(label="b", energy=Energy(2.0, 109.0, 111.0, calls=4))
    >>> updated, problems = attach_meter_log([inside, outside], EnergyConfig(meter_log=str(log)))
    >>> updated[0].energy.per_call(), problems[0].startswith("b: no meter energy")
    ({'meter': 20.0}, True)
    """
    samples = load_power_csv(energy.meter_log, energy.meter_time_column, energy.meter_watts_column,
                             energy.meter_clock_offset_s)
    updated, problems = [], []
    for m in records:
        if not m.ok or m.energy is None:
            continue
        try:
            updated.append(replace(m, energy=attach_meter(m.energy, samples)))
        except MeasurementError as exc:
            problems.append(f"{m.label}: no meter energy: {exc}")
    return updated, problems
