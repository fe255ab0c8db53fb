"""results.json: round trips, resume rules, several models, broken files, version 1, full disks."""
from __future__ import annotations

import errno
import json
import os

import pytest

from sbprof.base.errors import ConfigError
from sbprof.analysis.figures import cell_figures
from sbprof.record import Cell, Env, Measurement, MemoryPeak
from sbprof.results import files as files_module
from sbprof.results.store import RESULTS_FILE, Results, ResultStore, StorageError, load_results

RULES = {"warmup": 1, "measured": 3, "input": "random:seed=0"}
MACHINE = {"hostname": "h", "cpu": "test cpu", "cpu_count": 2, "torch": "2.x"}


def run_of(model="m", fingerprint="local:abc", **machine):
    return Results("profile", rules=dict(RULES), models={model: {"interface": "EncoderASR", "fingerprint": fingerprint}},
                   machine={**MACHINE, **machine})


def record(audio_s, batch_size, wall=(0.1, 0.2, 0.3), status="ok", threads=1, model="m"):
    ok = status == "ok"
    return Measurement(label=f"{audio_s}x{batch_size}", wall_s=list(wall) if ok else [],
                       cpu_s=list(wall) if ok else [], status=status, audio_seconds=audio_s * batch_size,
                       cell=Cell(model=model, device="cpu", threads=threads, audio_s=audio_s, batch_size=batch_size,
                                 input="random:seed=0"),
                       memory=MemoryPeak(peak_rss_bytes=10**9, peak_rss_delta_bytes=0, rss_method="clear_refs")
                       if ok else None, env=Env(torch="2.x", cpu="test cpu", cpu_count=2))


def test_round_trip_keeps_raw_samples(tmp_path):
    store = ResultStore(tmp_path, run_of())
    cells = [record(1, 1), record(1, 2, status="oom"), record(2, 1, wall=(0.5, 0.4, 0.6))]
    for m in cells:
        store.add(m)
    loaded = load_results(tmp_path)
    assert loaded.rules == RULES and loaded.machine == MACHINE
    assert loaded.records == cells


def test_derived_block_is_written_but_never_read_back(tmp_path):
    ResultStore(tmp_path, run_of(), derive=cell_figures).add(record(2, 1, wall=(0.5, 0.4, 0.6)))
    path = tmp_path / RESULTS_FILE
    data = json.loads(path.read_text())
    derived = data["records"][0]["derived"]
    assert derived["rtf"]["median"] == pytest.approx(0.25)  # 0.5 s / 2 s of audio
    assert derived["rtfx"] == pytest.approx(4.0)
    assert derived["peak_memory_gb"] == pytest.approx(1.0)
    data["records"][0]["derived"]["rtf"]["median"] = 123.0  # a stale statistic must not matter
    path.write_text(json.dumps(data))
    (m,) = ResultStore(tmp_path, run_of()).records()
    assert m.summary("wall_s").median == 0.5


def test_resume_key_and_replacement(tmp_path):
    store = ResultStore(tmp_path, run_of())
    store.add(record(1, 2, status="skipped"))
    store.add(record(1, 2))  # measured later: replaces the skipped record
    store.add(record(1, 2, threads=2))  # another setting: another cell
    reopened = ResultStore(tmp_path, run_of())
    assert len(reopened.records()) == 2
    assert reopened.get(record(1, 2).cell).status == "ok"


@pytest.mark.parametrize("other, expected", [
    (dict(rules={**RULES, "measured": 10}), "measured: 3 there, 10 now"),
    (dict(machine={"torch": "2.15"}), "torch: '2.x' there, '2.15' now"),
    (dict(machine={"hostname": "elsewhere"}), "hostname: 'h' there, 'elsewhere' now"),
    (dict(fingerprint="local:def"), "model m: fingerprint: 'local:abc' there, 'local:def' now"),
])
def test_other_conditions_are_refused_not_mixed(tmp_path, other, expected):
    ResultStore(tmp_path, run_of()).add(record(1, 1))
    now = run_of(fingerprint=other.get("fingerprint", "local:abc"), **other.get("machine", {}))
    now.rules = other.get("rules", now.rules)
    with pytest.raises(ConfigError) as info:
        ResultStore(tmp_path, now)
    message = str(info.value)
    assert str(tmp_path / RESULTS_FILE) in message and expected in message and "--output_folder" in message


def test_another_model_joins_the_file(tmp_path):
    ResultStore(tmp_path, run_of("a")).add(record(1, 1, model="a"))
    store = ResultStore(tmp_path, run_of("b", fingerprint="local:xyz"))
    store.add(record(1, 1, model="b"))
    loaded = load_results(tmp_path)
    assert set(loaded.models) == {"a", "b"} and {m.cell.model for m in loaded.records} == {"a", "b"}


@pytest.mark.parametrize("content, match", [
    ("{not json", "not a readable results file"),
    ('{"format": "other"}', "not an sbprof results file"),
    ('{"format": "sbprof-results", "version": 1}', "version 1 is not supported"),
    ('{"format": "sbprof-results", "version": 2, "records": null}', "'records' must be a list"),
    ('{"format": "sbprof-results", "version": 2, "records": [{"label": "x", "status": "fine"}]}',
     "record 0 ('x'): no 'cell'"),
    ('{"format": "sbprof-results", "version": 3, "job": "profile", "records": [{"label": "x", "cell": {}, '
     '"wall_s": "0.1"}]}', "record 0 ('x'): field 'wall_s' must be a list of numbers of seconds from 0 to 1e9"),
    ('{"format": "sbprof-results", "version": 3, "job": "profile", "records": [{"label": "x", "cell": {}, '
     '"wall_s": [], "audio_seconds": 1}]}', "field 'wall_s' is empty in a measured record"),
    ('{"format": "sbprof-results", "version": 3, "job": "profile", "records": [{"label": "x", "cell": {}, '
     '"wall_s": [0.1], "audio_seconds": 0}]}', "field 'audio_seconds' must be null or a positive number"),
    ('{"format": "sbprof-results", "version": 3, "job": "profile", "records": [{"label": "x", "cell": '
     '{"batch_size": "4"}}]}', "field 'cell.batch_size' must be null or an integer from 1 to 2^31-1, got '4'"),
    ('{"format": "sbprof-results", "version": 99, "job": "profile", "records": []}',
     "written by a newer sbprof (results format version 99); this sbprof reads versions 1 to 3"),
    ('{"format": "sbprof-results", "version": 3, "job": "profile", "records": [{"schema_version": 9, '
     '"label": "x", "cell": {}}]}', "written by a newer sbprof (record schema version 9)"),
    ('{"format": "sbprof-sweep-results", "version": 1, "settings": {}, "cells": null}', "'cells' (a list)"),
    ('{"format": "sbprof-sweep-results", "version": 1, "settings": {}, "cells": [{"status": "ok"}]}',
     "cell 0 has no coordinates"),
    ('{"format": "sbprof-sweep-results", "version": 1, "settings": {}, "cells": [{"config": {"model": "m"}}]}',
     "cell 0 lacks its coordinate(s) device, threads, audio_s, batch_size"),
])
def test_broken_results_are_config_errors(tmp_path, content, match):
    (tmp_path / RESULTS_FILE).write_text(content)
    with pytest.raises(ConfigError) as info:
        ResultStore(tmp_path, run_of())
    assert match in str(info.value) and str(tmp_path / RESULTS_FILE) in str(info.value)


def test_fields_this_sbprof_does_not_know_are_kept(tmp_path):
    store = ResultStore(tmp_path, run_of())
    store.add(record(1, 1))
    data = json.loads((tmp_path / RESULTS_FILE).read_text())
    data["records"][0]["power_trace"] = [1, 2]
    (tmp_path / RESULTS_FILE).write_text(json.dumps(data))
    reopened = ResultStore(tmp_path, run_of())
    reopened.add(record(2, 1))
    again = json.loads((tmp_path / RESULTS_FILE).read_text())
    assert again["records"][0]["power_trace"] == [1, 2]


def test_a_users_own_top_level_key_is_kept_at_the_next_save(tmp_path):
    """Before, a key of the user's own beside the records was dropped at the next record's save."""
    ResultStore(tmp_path, run_of()).add(record(1, 1))
    data = json.loads((tmp_path / RESULTS_FILE).read_text())
    data["reviewed"] = {"by": "ana", "ok": True}
    data["summary"] = {"stale": 1}  # sbprof's own block: rewritten, never read back
    (tmp_path / RESULTS_FILE).write_text(json.dumps(data))
    ResultStore(tmp_path, run_of()).add(record(2, 1))
    again = json.loads((tmp_path / RESULTS_FILE).read_text())
    assert again["reviewed"] == {"by": "ana", "ok": True} and len(again["records"]) == 2
    assert "summary" not in again  # no summarise given: the stale one is not carried


def test_failed_write_leaves_the_previous_file_whole(tmp_path, monkeypatch):
    store = ResultStore(tmp_path, run_of())
    store.add(record(1, 1))
    before = (tmp_path / RESULTS_FILE).read_bytes()

    def broken_replace(src, dst):
        raise OSError(errno.EIO, "disk gone")

    monkeypatch.setattr(files_module.os, "replace", broken_replace)
    with pytest.raises(StorageError, match="disk gone; the 1 record"):
        store.add(record(2, 1))
    assert (tmp_path / RESULTS_FILE).read_bytes() == before
    assert os.listdir(tmp_path) == [RESULTS_FILE]  # no temporary file left behind
    assert len(store.records()) == 1  # what the file lacks is not shown either


def test_full_disk_saves_the_last_record_in_the_reserve(tmp_path, monkeypatch):
    store = ResultStore(tmp_path, run_of())
    assert store.reserve.hold()
    store.add(record(1, 1))
    real_replace, calls = files_module.os.replace, []

    def full_until_reserve_given_back(src, dst):
        calls.append(dst)
        if store.reserve.path.exists():
            raise OSError(errno.ENOSPC, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(files_module.os, "replace", full_until_reserve_given_back)
    with pytest.raises(StorageError, match="disk of .* is full: the last result was saved"):
        store.add(record(2, 1))
    assert len(calls) == 2  # the first try, then one more after the reserve was given back
    assert [m.cell.audio_s for m in load_results(tmp_path).records] == [1, 2]  # nothing measured is lost


def test_files_get_the_umask_permissions(tmp_path):
    old = os.umask(0o027)
    try:
        ResultStore(tmp_path, run_of()).add(record(1, 1))
    finally:
        os.umask(old)
    assert oct((tmp_path / RESULTS_FILE).stat().st_mode & 0o777) == oct(0o640)
