"""The record: raw samples kept through JSON, typed coordinates, tolerance of newer fields, version-1 migration."""
import json

import pytest

from sbprof.base.errors import ConfigError
from sbprof.record import Cell, Counts, Energy, Env, Measurement, MemoryPeak


def full_record():
    return Measurement(
        label="x", cell=Cell(model="m", variant="ctc_weight=0.3", device="cpu", threads=2, audio_s=1.0,
                             batch_size=4, input="random:seed=0", run=2, rank=1, params={"mode": "sorted"}),
        warmup=1, wall_s=[0.3, 0.1, 0.2], cpu_s=[0.3, 0.1, 0.2], audio_seconds=4.0,
        memory=MemoryPeak(peak_rss_bytes=10, rss_method="clear_refs", heap_trim="malloc_trim"),
        counts=Counts(flops=2e9, macs=1e9, params=3_000_000, trainable_params=3_000_000),
        energy=Energy(1.0, 10.0, 11.0, {"gpu:0": 50.0}, {"gpu:0": "nvml"}, {"rapl": "absent"}, calls=5),
        settings={"interface": "EncoderASR"}, env=Env(torch="2.x", hostname="h"), extra={"trace": "t.json"})


def test_round_trip_through_json_keeps_everything():
    m = full_record()
    back = Measurement.from_dict(json.loads(json.dumps(m.to_dict())))
    assert back == m
    assert back.wall_s == [0.3, 0.1, 0.2]  # order and values kept, not just statistics
    assert back.summary("wall_s").median == 0.2
    assert back.energy.per_call() == {"gpu:0": 10.0} and back.cell.params == {"mode": "sorted"}


def test_a_record_of_a_newer_version_is_refused_naming_the_versions():
    d = {**full_record().to_dict(), "schema_version": 3}
    with pytest.raises(ConfigError, match="written by a newer sbprof .record schema version 3.; this sbprof reads "
                                          "versions 1 and 2"):
        Measurement.from_dict(d)


@pytest.mark.parametrize("change, message", [
    ({"wall_s": "0.1"}, "field 'wall_s' must be a list of numbers of seconds from 0 to 1e9, got '0.1'"),
    ({"cell": None}, "field 'cell' must be a mapping of coordinates, got None"),
    ({"status": "fine"}, "field 'status' must be one of ok, skipped, oom, error, got 'fine'"),
    ({"audio_seconds": -2}, "field 'audio_seconds' must be null or a positive number of seconds, at most 1e9, got -2"),
])
def test_a_malformed_record_is_one_config_error_naming_the_field(change, message):
    with pytest.raises(ConfigError) as caught:
        Measurement.from_dict({**full_record().to_dict(), **change})
    assert str(caught.value) == message


def test_garbage_and_an_unknown_sample_list_are_config_errors():
    with pytest.raises(ConfigError, match="must be a JSON object, got list"):
        Measurement.from_dict([1, 2])
    with pytest.raises(ConfigError, match="no sample list 'latency' in a measurement; there are wall_s, cpu_s, cuda_s"):
        full_record().summary("latency")


def test_fields_this_version_does_not_know_are_kept_and_written_back():
    d = full_record().to_dict()
    d["thermal"] = {"throttled": False}  # a field this version does not know
    d["cell"]["socket"] = 1
    d["memory"]["peak_swap_bytes"] = 0
    m = Measurement.from_dict(d)
    assert m.unknown == {"thermal": {"throttled": False}}
    assert m.to_dict()["thermal"] == {"throttled": False}
    assert m.cell.threads == 2 and m.memory.peak_rss_bytes == 10


def test_version_1_record_is_migrated():
    v1 = {"schema_version": 1, "label": "c", "device": "cpu", "num_threads": 1, "warmup": 2, "wall_s": [0.5],
          "cpu_s": [0.5], "cuda_s": None, "memory": {"peak_rss_bytes": 7, "peak_rss_delta_bytes": 1,
                                                     "rss_method": "clear_refs", "peak_cuda_bytes": None,
                                                     "peak_cuda_delta_bytes": None, "peak_cuda_reserved_bytes": None},
          "config": {"model": "encoder_asr", "device": "cpu", "threads": 1, "audio_s": 2, "batch_size": 1,
                     "input": "random:seed=0", "batch_audio_s": 2.0, "interface": "EncoderASR", "seed": 0},
          "status": "ok", "message": "", "env": {"torch": "2.14.1"}, "extra": {"loadavg_1m": 0.5}}
    m = Measurement.from_dict(v1)
    assert m.cell == Cell(model="encoder_asr", device="cpu", threads=1, audio_s=2, batch_size=1,
                          input="random:seed=0")
    assert m.audio_seconds == 2.0 and m.settings == {"interface": "EncoderASR", "seed": 0}
    assert m.memory.peak_rss_bytes == 7 and m.extra == {"loadavg_1m": 0.5} and m.unknown == {}


def test_failed_measurement_has_no_statistics():
    m = Measurement(label="x", status="oom", message="CUDA out of memory")
    assert not m.ok
    with pytest.raises(ValueError, match="no wall_s samples"):
        m.summary("wall_s")


def test_bad_status_and_schema_are_refused():
    with pytest.raises(ValueError):
        Measurement(label="x", status="fine")
    d = Measurement(label="x").to_dict()
    d["schema_version"] = 0
    with pytest.raises(ConfigError, match="schema version 0"):
        Measurement.from_dict(d)
    with pytest.raises(ConfigError, match="JSON object"):
        Measurement.from_dict(["not", "a", "record"])
