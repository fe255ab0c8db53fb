"""A results file's records hold only the payload keys their job declares: today's format refuses another with one
line naming the class, the key, its nearest field and the file; an older format drops it and says so."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from sbprof.analysis.payloads import PAYLOADS, check_payloads, unknowns
from sbprof.base.errors import ConfigError
from sbprof.record import Measurement, Results
from sbprof.record.payload import Payload
from sbprof.registry import JOBS

DATA = Path(__file__).resolve().parents[1] / "data"


def test_every_job_that_writes_results_declares_its_payloads_and_each_extends_payload():
    assert set(JOBS) <= set(PAYLOADS)
    assert all(issubclass(cls, Payload) for classes in PAYLOADS.values() for cls in classes)


def test_a_misspelt_key_is_refused_by_class_field_and_file():
    r = Results(job="stream", records=[Measurement("train", extra={"chunk_sample": 1280, "sample_rate": 16000})])
    with pytest.raises(ConfigError) as err:
        check_payloads(r, "results/x/results.json")
    assert str(err.value) == ("results/x/results.json: record 'train': extra: unknown key 'chunk_sample' of "
                              "StreamPayload (did you mean StreamPayload.chunk_samples?)")


def test_a_key_near_no_field_is_refused_without_a_guess_and_calibration_records_are_checked_too():
    r = Results(job="profile", calibration=[Measurement("ref", extra={"zzz": 1})])
    with pytest.raises(ConfigError, match=r"^r.json: record 'ref': extra: unknown key 'zzz' of CellPayload$"):
        check_payloads(r, "r.json")


def test_the_keys_any_record_may_hold_are_every_jobs():
    for job in PAYLOADS:
        r = Results(job=job, records=[Measurement("c", extra={"extra_error": "x", "retryable": True,
                                                                 "cluster": {"node": "n"}})])
        assert check_payloads(r, "r.json") == []


def test_an_older_format_drops_the_undeclared_keys_and_names_each():
    kept = {"loadavg_1m": 1.5, "window_s": 2.0}
    r = Results(job="profile", records=[Measurement("a", extra={**kept, "busy": 1}),
                                        Measurement("b", extra=dict(kept))])
    assert check_payloads(r, "r.json", migrated_from=2) == ["migrated from format 2: dropped extra.busy of record 'a'"]
    assert [m.extra for m in r.records] == [kept, kept]


@pytest.mark.parametrize("path", sorted(DATA.glob("results_*/*.json")), ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_every_key_the_kept_files_hold_is_declared(path):
    """The kept files (one per job, written by earlier sbprof versions whose workers wrote what today's do) hold
    no key, at any depth, that their job's payloads leave out: nothing is refused, nothing dropped."""
    data = json.loads(path.read_text())
    job = {"sweep": "profile", "compare": "compare-models"}.get(data["job"], data["job"])
    records = [Measurement(r["label"], extra=r.get("extra", {})) for r in data["records"] + data.get("calibration", [])]
    assert any(m.extra for m in records)
    assert [(m.label, path, key) for m in records for path, _, key, _ in unknowns(job, m)] == []


def _run_record(**peak):
    return Measurement("loop:train", extra={"kind": "loop", "peak_flops": {"precision": "fp32", **peak},
                                            "params": {"total": 3, "trainable": 2, "frozen": 1, "bytes": 12,
                                                       "modules": [{"name": "enc", "total": 3, "trainable": 2}]}})


def test_a_misspelt_key_inside_a_payload_field_is_refused_by_its_path_and_class():
    r = Results(job="run", records=[_run_record(flop_per_s=1e9)])
    with pytest.raises(ConfigError) as err:
        check_payloads(r, "r.json")
    assert str(err.value) == ("r.json: record 'loop:train': extra.peak_flops: unknown key 'flop_per_s' of PeakFlops "
                              "(did you mean PeakFlops.flops_per_s?)")
    r.records[0].extra["peak_flops"] = {"flops_per_s": 1e9}
    r.records[0].extra["params"]["modules"][0]["totl"] = 3  # in a list of rows too
    with pytest.raises(ConfigError, match=r"extra\.params\.modules\[0\]: unknown key 'totl' of ModuleParams"):
        check_payloads(r, "r.json")


def test_a_derived_figure_a_class_writes_for_readers_is_no_unknown_key():
    # ParamCount.to_dict adds its properties "frozen" and "bytes"; they are read back as properties, not fields
    assert check_payloads(Results(job="run", records=[_run_record(flops_per_s=1e9)]), "r.json") == []


def test_an_older_format_drops_an_undeclared_key_inside_a_field_and_names_its_path():
    record = _run_record(flops_per_s=1e9, probe_s=0.3)
    r = Results(job="run", records=[record])
    assert check_payloads(r, "r.json", migrated_from=3) == [
        "migrated from format 3: dropped extra.peak_flops.probe_s of record 'loop:train'"]
    assert r.records[0].extra["peak_flops"] == {"precision": "fp32", "flops_per_s": 1e9}
    assert "probe_s" in record.extra["peak_flops"]  # the record given is left as it was
