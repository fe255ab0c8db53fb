"""An external meter's CSV integrated over a run's window, against analytic integrals."""
import math
import re
from datetime import datetime

import numpy as np
import pytest

from sbprof.measuring.energy.external import attach_meter, integrate_power, load_power_csv
from sbprof.measuring.energy.meter import EnergyMeter
from sbprof.record.measurement import Energy
from sbprof.base.errors import ConfigError, MeasurementError


def write_csv(path, rows, header="timestamp,watts"):
    path.write_text(header + "\n" + "\n".join(f"{t},{w}" for t, w in rows) + "\n")
    return str(path)


def test_sinusoidal_power_against_its_integral(tmp_path):
    t0 = 1_700_000_000.0
    ts = np.arange(0.0, 10.0, 0.01)
    path = write_csv(tmp_path / "meter.csv", [(t0 + t, 100 + 50 * math.sin(t)) for t in ts])
    samples = load_power_csv(path)
    a, b = 0.333, 7.777
    exact = 100 * (b - a) - 50 * (math.cos(b) - math.cos(a))
    # Trapezoid error is at most (b - a) * h^2 / 12 * max|P''| = 7.4 * 1e-4 / 12 * 50 ~ 3e-3 J.
    assert integrate_power(samples, t0 + a, t0 + b) == pytest.approx(exact, abs=5e-3)


def test_linear_power_is_exact_with_interpolated_edges():
    samples = [(0.0, 10.0), (1.0, 15.0), (2.0, 20.0), (3.0, 25.0)]  # P = 10 + 5 t
    # Integral of 10 + 5 t over [0.25, 2.5]: 10 * 2.25 + 2.5 * (2.5^2 - 0.25^2)
    assert integrate_power(samples, 0.25, 2.5) == pytest.approx(37.96875, abs=1e-12)
    # A window inside one sampling interval still integrates the interpolated line.
    assert integrate_power(samples, 1.2, 1.4) == pytest.approx(0.2 * (10 + 5 * 1.3), abs=1e-12)


def test_iso_timestamps_columns_and_clock_offset(tmp_path):
    base = datetime(2025, 1, 1, 12, 0, 0)
    rows = [(base.replace(second=s).isoformat(), 30.0) for s in (0, 10, 20)]
    path = write_csv(tmp_path / "m.csv", rows, header="time,power_w")
    samples = load_power_csv(path, time_column="time", watts_column="power_w", clock_offset_s=2.0)
    assert samples[0] == (base.timestamp() + 2.0, 30.0)
    assert integrate_power(samples, base.timestamp() + 5, base.timestamp() + 15) == pytest.approx(300.0)


def test_window_outside_the_log_is_refused(tmp_path):
    samples = [(10.0, 5.0), (20.0, 5.0)]
    with pytest.raises(MeasurementError, match="did not record all of it"):
        integrate_power(samples, 5.0, 15.0)
    with pytest.raises(MeasurementError, match="did not record all of it"):
        integrate_power(samples, 15.0, 25.0)
    with pytest.raises(ConfigError):
        integrate_power(samples, 15.0, 12.0)
    with pytest.raises(ConfigError):
        integrate_power([(1.0, 5.0), (1.0, 6.0)], 1.0, 1.0 + 1e-9)


def test_bad_csv_names_the_file_and_line(tmp_path):
    with pytest.raises(ConfigError, match="no column"):
        load_power_csv(write_csv(tmp_path / "a.csv", [(1, 2)], header="t,w"))
    with pytest.raises(ConfigError, match="line 3"):
        load_power_csv(write_csv(tmp_path / "b.csv", [(1, 2), ("x", 3)]))
    with pytest.raises(ConfigError, match="missing.csv: no such power log"):
        load_power_csv(str(tmp_path / "missing.csv"))


@pytest.mark.parametrize("rows, message", [
    ([(1, 2), (2, -5)], "line 3: a sample must be a finite time and a power from 0 to 1e+09 W, got '2', '-5'"),
    ([(1, 2), (2, "1e308")], "line 3: a sample must be a finite time and a power from 0 to 1e+09 W"),
    ([(1, 2), ("inf", 3)], "line 3: a sample must be a finite time"),
    ([(1, 2), (2, "nan")], "line 3: a sample must be a finite time"),
])
def test_a_power_out_of_sense_is_refused_naming_the_line(tmp_path, rows, message):
    """Before, a negative or 1e308 W sample was integrated as it stood."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_power_csv(write_csv(tmp_path / "p.csv", rows))


def test_a_power_log_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    """Before, reading it blocked for ever (the comparison never started)."""
    import os

    os.mkfifo(tmp_path / "meter.csv")
    with pytest.raises(ConfigError, match="meter.csv: not a power log: it is a FIFO"):
        load_power_csv(str(tmp_path / "meter.csv"))


def test_attach_meter_to_a_measured_window():
    with EnergyMeter(cpu=False, gpu=False) as meter:
        sum(range(100_000))
    run = meter.result
    samples = [(run.start_unix_s - 1, 42.0), (run.end_unix_s + 1, 42.0)]
    with_meter = attach_meter(run, samples)
    assert with_meter.joules["meter"] == pytest.approx(42.0 * (run.end_unix_s - run.start_unix_s))
    assert with_meter.sources["meter"] == "meter" and with_meter.measurable
    assert Energy.from_dict(with_meter.to_dict()) == with_meter
    assert run.joules == {}  # the original is not changed
