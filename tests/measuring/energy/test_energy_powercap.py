"""RAPL through powercap: a fake tree made in tmp_path, wrap-around included."""
import os
import time

import pytest
import torch

from sbprof.measuring.energy import powercap
from sbprof.measuring.energy.meter import EnergyMeter
from sbprof.measuring.energy.powercap import RaplCounter, counter_delta_uj, find_rapl_zones
from sbprof.base.errors import BackendUnavailable, MeasurementError

MAX = 262_143_328_850  # a real package's max_energy_range_uj


def zone(root, folder, name, energy_uj, max_uj=MAX):
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "name").write_text(name + "\n")
    (path / "max_energy_range_uj").write_text(f"{max_uj}\n")
    set_energy(root, folder, energy_uj)
    return path


def set_energy(root, folder, energy_uj):
    # Replace the file whole, as sysfs reads are: the meter's poller may read at any moment.
    tmp = root / folder / "energy_uj.tmp"
    tmp.write_text(f"{energy_uj}\n")
    os.replace(tmp, root / folder / "energy_uj")


@pytest.fixture
def tree(tmp_path):
    """Two packages, one with core and dram sub-zones, plus folders that are not RAPL zones."""
    zone(tmp_path, "intel-rapl:0", "package-0", 1_000_000)
    zone(tmp_path, "intel-rapl:0:0", "core", 500_000)
    zone(tmp_path, "intel-rapl:0:1", "dram", 200_000, max_uj=65_712_999_613)
    zone(tmp_path, "intel-rapl:1", "package-1", 3_000_000)
    (tmp_path / "intel-rapl").mkdir()            # the control type folder: no counter
    zone(tmp_path, "intel-rapl-mmio:0", "package-0", 7)  # MMIO view of package 0: not read twice
    return tmp_path


def test_zones_found_and_named(tree):
    zones = find_rapl_zones(str(tree))
    assert [z.domain for z in zones] == ["cpu:package-0", "cpu:package-0/core", "cpu:package-0/dram",
                                         "cpu:package-1"]
    assert zones[2].max_energy_range_uj == 65_712_999_613
    assert zones[0].path == os.path.join(str(tree), "intel-rapl:0")


def test_counter_reads_energy_exactly(tree):
    counter = RaplCounter(str(tree))
    counter.start()
    set_energy(tree, "intel-rapl:0", 1_000_000 + 12_345_678)
    set_energy(tree, "intel-rapl:0:0", 500_000 + 1_000_000)
    set_energy(tree, "intel-rapl:1", 3_000_000)
    joules = counter.poll()
    assert joules == {"cpu:package-0": 12.345678, "cpu:package-0/core": 1.0, "cpu:package-0/dram": 0.0,
                      "cpu:package-1": 0.0}


def test_wrap_around_between_reads(tree):
    set_energy(tree, "intel-rapl:0", MAX - 1_000)
    counter = RaplCounter(str(tree))
    counter.start()
    set_energy(tree, "intel-rapl:0", 500)  # wrapped: 1000 to the top, then 500
    assert counter.poll()["cpu:package-0"] == pytest.approx(1_500e-6)
    # Two more wraps, each seen by a poll: 2 * MAX in all on top.
    set_energy(tree, "intel-rapl:0", MAX - 10)
    counter.poll()
    set_energy(tree, "intel-rapl:0", 490)
    counter.poll()
    set_energy(tree, "intel-rapl:0", 500)
    assert counter.poll()["cpu:package-0"] == pytest.approx((1_500 + MAX) * 1e-6, rel=1e-12)
    assert counter_delta_uj(MAX - 5, 5, MAX) == 10


def test_meter_polls_in_the_background_so_several_wraps_count(tree):
    meter = EnergyMeter(gpu=False, powercap_root=str(tree), poll_s=0.01)
    meter.start()
    set_energy(tree, "intel-rapl:0", MAX - 100)    # +MAX - 1_000_100
    time.sleep(0.3)
    set_energy(tree, "intel-rapl:0", 500)          # wrap: +600
    time.sleep(0.3)
    set_energy(tree, "intel-rapl:0", MAX - 50)     # +MAX - 550
    result = meter.stop()
    # Read only at start and stop this would be one partial lap: MAX - 1_000_050 uJ.
    assert result.joules["cpu:package-0"] == pytest.approx((2 * MAX - 1_000_050) * 1e-6, rel=1e-12)
    assert result.sources["cpu:package-0"] == "rapl" and "nvml" not in result.unavailable
    assert result.duration_s >= 0.6
    assert result.watts()["cpu:package-0"] == pytest.approx(result.joules["cpu:package-0"] / result.duration_s)


def test_missing_or_empty_or_unreadable_tree(tmp_path, monkeypatch):
    with pytest.raises(BackendUnavailable, match="exposes no RAPL counters"):
        find_rapl_zones(str(tmp_path / "absent"))
    with pytest.raises(BackendUnavailable, match="no intel-rapl"):
        find_rapl_zones(str(tmp_path))
    zone(tmp_path, "intel-rapl:0", "package-0", 1)
    real_read = powercap._read_text

    def root_only(path):
        if path.endswith("energy_uj"):
            raise PermissionError(13, "Permission denied", path)
        return real_read(path)

    monkeypatch.setattr(powercap, "_read_text", root_only)
    with pytest.raises(BackendUnavailable, match="root-only"):
        find_rapl_zones(str(tmp_path))


def test_a_failed_poll_is_an_error_not_a_wrong_figure(tree):
    meter = EnergyMeter(gpu=False, powercap_root=str(tree), poll_s=0.01)
    meter.start()
    set_energy(tree, "intel-rapl:1", "garbage")
    time.sleep(0.2)
    with pytest.raises(MeasurementError, match="reading RAPL counters failed"):
        meter.stop()
    with pytest.raises(MeasurementError, match="before start"):
        meter.stop()


@pytest.mark.skipif(os.path.isdir("/sys/class/powercap") or torch.cuda.is_available(),
                    reason="this machine has energy counters")
def test_not_measurable_here_is_reported_cleanly():
    with EnergyMeter() as meter:
        sum(range(10_000))
    result = meter.result
    assert not result.measurable and result.joules == {} and result.watts() == {}
    assert result.unavailable["rapl"] == ("no /sys/class/powercap: this kernel or machine exposes no RAPL "
                                          "counters (e.g. a VM)")
    assert set(result.unavailable) == {"rapl", "nvml"}  # nvml: library not found, or not installed
    assert result.describe().startswith("not measurable here (rapl: no /sys/class/powercap")
    assert result.duration_s > 0 and result.end_unix_s >= result.start_unix_s
