"""Bad input to the stream job, each one line and exit code 2 with nothing written or changed: keys the model
was not trained for named as the user wrote them, new keys' values, and hand-edited stream records (per-chunk
lists of unequal length, a field of the wrong type) refused on loading, by ``--render-only`` and by a resumed run,
naming the record and the field, the file left byte for byte."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers.fake_interfaces import use_test_environment
from helpers.fake_streaming import write_fake_model
from helpers.stream_configs import write_stream_yaml
from sbprof.cli import main
from sbprof.results import RESULTS_FILE

TRAINED = ("chunkwise_prob: 1.0, chunk_size_min: 8, chunk_size_max: 32, limited_left_context_prob: 0.75, "
           "left_context_chunks_min: 2, left_context_chunks_max: 16")


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")


def _one_line(capsys, *parts: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("sbprof: error: "), err
    for part in parts:
        assert part in err, err
    return err


@pytest.mark.parametrize("override, message", [
    ('{chunk_size: 4}', "capacity.chunk_size: 4 is not allowed by model"),
    ('{chunk_size: 16, left_context_chunks: 0}', "capacity.left_context_chunks: 0 is not allowed by model"),
])
def test_a_capacity_setting_the_model_was_not_trained_for_names_the_capacity_key(tmp_path, capsys, override,
                                                                                  message):
    folder = write_fake_model(tmp_path / "fake", 0.001, trained=TRAINED)
    path = write_stream_yaml(tmp_path / "s.yaml", str(folder), chunk_sizes=[8, 16],
                             capacity={"chunk_size": 8, "left_context_chunks": 2})
    assert main(["stream", str(path), "--noprogressbar", "--capacity", override]) == 2
    err = _one_line(capsys, message)
    assert "streaming." not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("edit, message", [
    ({"traffic": "bursty"}, "streaming.traffic must be one of spread, poisson, aligned, got 'bursty'"),
    ({"alignment": "no_such_ends.txt"}, "streaming.alignment: no such file 'no_such_ends.txt'"),
    ({"alignment": [0.5, 0.2]}, "streaming.alignment: the end times must not decrease"),
    ({"alignment": ["a"]}, "streaming.alignment must be a non-empty list of end times in seconds"),
    ({"capacity": {"p99_delay_ms": -3}}, "capacity.p99_delay_ms must be null (one chunk duration) or a positive"),
    ({"capacity": {"chunk_size": [8, 0]}}, "capacity.chunk_size must hold only positive integers, got 0"),
    ({"capacity": "garbage"}, "capacity must be a mapping"),
    # Before: 1e308 s passed the check, and every cell failed in its worker with an OverflowError
    ({"audio_s": 1e308}, "streaming.audio_s must be null or a positive number of seconds up to 2,147,483,647"),
])
def test_new_keys_are_checked_before_any_worker(tmp_path, capsys, edit, message):
    path = write_stream_yaml(tmp_path / "s.yaml", str(write_fake_model(tmp_path / "fake", 0.001)), **edit)
    assert main(["stream", str(path)]) == 2
    _one_line(capsys, message)
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A finished folder: one latency cell and a capacity search (a fast fake), to be edited by hand."""
    tmp = tmp_path_factory.mktemp("measured")
    model = write_fake_model(tmp / "fake", compute_s=0.002, frame_samples=400, final_chunks=0)
    path = write_stream_yaml(tmp / "s.yaml", str(model), audio_s=0.8, output_folder=tmp / "out",
                             capacity={"chunk_size": 8, "left_context_chunks": 2, "max_streams": 2})
    with pytest.MonkeyPatch.context() as monkeypatch:
        use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")
        assert main(["stream", str(path), "--noprogressbar"]) == 0
    return tmp


def _edit(measured: Path, tmp_path: Path, change) -> Path:
    folder = tmp_path / "out"
    shutil.copytree(measured / "out", folder)
    shutil.copy(measured / "s.yaml", tmp_path / "s.yaml")
    data = json.loads((folder / RESULTS_FILE).read_text())
    change(data["records"])
    (folder / RESULTS_FILE).write_text(json.dumps(data, indent=1))
    return folder


def _latency(records):
    return next(r for r in records if r["cell"]["params"]["kind"] == "latency")


def _capacity(records):
    return next(r for r in records if r["cell"]["params"]["kind"] == "capacity")


def _drop_last(column):
    def change(records):
        _latency(records)["extra"]["chunks"][column].pop()
    return change


def _set(value):
    def change(records):
        _latency(records)["extra"]["chunks"] = value
    return change


def _probe_garbage(records):
    _capacity(records)["extra"]["probes"][0]["chunks"]["arrival_s"][0] = "soon"


@pytest.mark.parametrize("change, parts", [
    (_drop_last("end_s"), ["record 'chunk 8, left 2, 1 stream' (run 0)",
                           "extra.chunks.end_s holds 3 values where extra.chunks.stream holds 4"]),
    (_drop_last("tokens"), ["extra.chunks.tokens holds 3 values where extra.chunks.stream holds 4"]),
    (_set("garbage"), ["record 'chunk 8, left 2, 1 stream' (run 0)",
                       "extra.chunks must be a mapping of per-chunk lists, got str 'garbage'"]),
    (_set({"stream": [0]}), ["extra.chunks.index must be a list"]),
    (_probe_garbage, ["record 'capacity, chunk 8, left 2' (run 0)",
                      "extra.probes[0].chunks.arrival_s must hold finite numbers of seconds"]),
])
@pytest.mark.parametrize("how", ["render-only", "resume"])
def test_a_hand_edited_stream_record_is_refused_naming_record_and_field_and_nothing_changes(measured, tmp_path,
                                                                                         capsys, change, parts, how):
    folder = _edit(measured, tmp_path, change)
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")}
    argv = (["stream", "--render-only", str(folder)] if how == "render-only"
            else ["stream", str(tmp_path / "s.yaml"), "--noprogressbar", "--output_folder", str(folder)])
    assert main(argv) == 2
    _one_line(capsys, "results.json", *parts)
    after = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")}
    assert after == before  # results.json, report.md and results.csv byte for byte
