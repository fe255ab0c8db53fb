"""Energy through the comparison's measuring window: exact joules from a fake powercap tree, or "not measurable"."""
from __future__ import annotations

import pytest

from helpers.compare_fakes import fake_powercap, write_counter
from sbprof.compare_models.config import validate
from sbprof.compare_models.worker import CPU_ONLY, measure_energy_window
from sbprof.record import Cell

MAX_UJ = 1_000_000


def config(tmp_path, root, samples=5):
    cfg = validate({"variants": [{"name": "v", "source": "encoder_asr", "type": "EncoderASR"}], "vary": "audio_s",
                    "values": [1], "measured": samples, "devices": "cpu", "cpu_threads": 1,
                    "energy": {"powercap_root": str(root)}}, "c.yaml", tmp_path)
    return cfg


def test_window_reads_a_fake_rapl_counter_exactly_across_its_wrap(tmp_path):
    zone = fake_powercap(tmp_path / "powercap", start_uj=900_000, max_uj=MAX_UJ)
    per_call_uj = 70_000  # 6 calls (5 timed + the memory call) = 420 mJ: wraps once past 1 J

    def call():
        write_counter(zone, (int((zone / "energy_uj").read_text()) + per_call_uj) % MAX_UJ)

    m = measure_energy_window(config(tmp_path, tmp_path / "powercap"), "cpu", 1, call, "p", Cell(model="m"))
    assert int((zone / "energy_uj").read_text()) == 320_000  # the counter did wrap
    assert m.energy.calls == 6 and m.energy.sources == {"cpu:package-0": "rapl"}
    assert m.energy.per_call() == {"cpu:package-0": pytest.approx(0.07, abs=1e-12)}
    assert m.energy.unavailable == {"nvml": CPU_ONLY}  # a CPU variant: the GPU is not read
    assert len(m.wall_s) == 5 and m.memory is not None


def test_no_counter_is_reported_as_not_measurable_with_the_reason(tmp_path):
    m = measure_energy_window(config(tmp_path, tmp_path / "absent"), "cpu", 1, lambda: None, "p", Cell(model="m"))
    assert not m.energy.measurable
    assert m.energy.describe() == (f"not measurable here (rapl: no {tmp_path / 'absent'}: this kernel or machine "
                                   f"exposes no RAPL counters (e.g. a VM); nvml: {CPU_ONLY})")


def test_an_unreadable_counter_during_the_window_keeps_the_timing(tmp_path):
    zone = fake_powercap(tmp_path / "powercap", start_uj=0, max_uj=MAX_UJ)
    cfg = config(tmp_path, tmp_path / "powercap", samples=2)

    def call():
        (zone / "energy_uj").unlink(missing_ok=True)  # the counter vanishes mid-window

    m = measure_energy_window(cfg, "cpu", 1, call, "p", Cell(model="m"))
    assert m.energy is None and "energy_uj" in m.extra["energy_error"] and len(m.wall_s) == 2
