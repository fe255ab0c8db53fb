"""Hand-edited results that would mix runs or print made-up figures: refused on loading, naming the record.

A real small ``profile`` run is measured once; each case edits a copy of its ``results.json`` the way a person
might (a record pasted twice, a run index changed, a field deleted, a NaN) and then renders it and resumes it.
Both must be one ``sbprof: error:`` line and exit 2, with every file of the folder left byte for byte.
"""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Callable, Dict

import pytest

from helpers.fake_interfaces import use_test_environment
from helpers.job_configs import argv_of
from helpers.refusals import assert_refused
from sbprof.cli import main
from sbprof.base.errors import ConfigError
from sbprof.results import RESULTS_FILE, load_results


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One finished 4-cell, 1-run profile run and its configuration file."""
    base = tmp_path_factory.mktemp("profile")
    mp = pytest.MonkeyPatch()
    use_test_environment(mp, tmp_path_factory.getbasetemp() / "sbprof-models")
    argv = argv_of("profile", base, base / "out")
    assert main(["profile", *argv]) == 0
    mp.undo()
    return base / "out", argv[0]


def _dup(data):
    data["records"].append(json.loads(json.dumps(data["records"][0])))


def _run_99(data):
    data["records"][0]["cell"]["run"] = 99


def _nan_peak(data):
    data["records"][0]["memory"]["peak_rss_bytes"] = math.nan


EDITS: Dict[str, tuple] = {
    "a record pasted twice": (_dup, "record 4 ('/", "repeats the coordinates of record 0 (same cell, run 0)"),
    "a run index changed to 99": (_run_99, "record 0 ('/", "is run 99 of its cell, which holds no run 0"),
    "machine deleted": (lambda d: d.pop("machine"), "results.json: no 'machine'", "a resume is checked against it"),
    "a NaN peak": (_nan_peak, "record 0 ('/", "field 'memory.peak_rss_bytes' must be null or a whole number of bytes"
                                             " from 0 to 2^63-1, got nan"),
    "an infinite sample": (lambda d: d["records"][1]["wall_s"].__setitem__(0, math.inf), "record 1 ('/",
                           "field 'wall_s' must be a list of numbers of seconds from 0 to 1e9, got [inf,"),
    "cpu_s one sample short": (lambda d: d["records"][2]["cpu_s"].pop(), "record 2 ('/",
                               "field 'cpu_s' must hold one sample per measured call, as 'wall_s' does: "),
    "cpu_s deleted": (lambda d: d["records"][0].pop("cpu_s"), "record 0 ('/", "no field 'cpu_s'"),
    "cell.run deleted": (lambda d: d["records"][0]["cell"].pop("run"), "record 0 ('/", "no field 'cell.run'"),
    "a list as a coordinate": (lambda d: d["records"][0]["cell"]["params"].update(mode=[1]), "record 0 ('/",
                               "field 'cell.params' must be a mapping of texts, numbers, booleans or nulls"),
    "energy without its window": (lambda d: d["records"][0].update(energy={"joules": {}}), "record 0 ('/",
                                  "no field 'energy.duration_s'"),
    "a negative FLOP count": (lambda d: d["records"][0].update(counts={"flops": -1.0}), "record 0 ('/",
                              "field 'counts.flops' must be null or a number from 0 to 1e30, got -1.0"),
    # Figures checked for sense, not only type: before, these passed the checks and broke the report's rendering.
    "a sample of 1e308 s": (lambda d: d["records"][1]["wall_s"].__setitem__(0, 1e308), "record 1 ('/",
                            "field 'wall_s' must be a list of numbers of seconds from 0 to 1e9, got [1e+308,"),
    "a 401-digit peak": (lambda d: d["records"][0]["memory"].update(peak_rss_bytes=10**400), "record 0 ('/",
                         "field 'memory.peak_rss_bytes' must be null or a whole number of bytes from 0 to 2^63-1"),
    "a 401-digit FLOP count": (lambda d: d["records"][0].update(counts={"flops": 10**400}), "record 0 ('/",
                               "field 'counts.flops' must be null or a number from 0 to 1e30"),
    "1e308 in extra": (lambda d: d["records"][2]["extra"].update(window_s=1e308), "record 2 ('/",
                       "field 'extra.window_s' holds 1e+308, out of any sense for a figure"),
    # A record tied to its file: another job's or run's record pasted in, a version label edited, a field named.
    "a record of another job pasted in": (lambda d: d["records"].append(_foreign(d["records"][0])), "record 4 ('",
                                          "is of model '/elsewhere/streaming-asr', which this file does not list"),
    "a version-3 file labelled 2": (lambda d: d.update(version=2), "results.json: labelled results format version 2",
                                    "but its job 'profile' is written as in version 3"),
    "wall_s deleted": (lambda d: d["records"][0].pop("wall_s"), "record 0 ('/",
                       "no field 'wall_s' (the samples that 'cpu_s' goes with)"),
}


def _foreign(record):
    """A copy of ``record`` as another job's (a stream's) would read: its own model and coordinates."""
    copy = json.loads(json.dumps(record))
    copy["label"] = "chunk 8, left 2, 1 stream"
    copy["cell"].update(model="/elsewhere/streaming-asr", params={"kind": "latency", "chunk_size": 8})
    return copy


def _files(folder: Path) -> Dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _edited(measured, tmp_path: Path, edit: Callable[[dict], None]) -> Path:
    good, _ = measured
    bad = tmp_path / "edited"
    shutil.copytree(good, bad)
    data = json.loads((bad / RESULTS_FILE).read_text())
    edit(data)
    (bad / RESULTS_FILE).write_text(json.dumps(data))
    return bad


@pytest.mark.slow
@pytest.mark.parametrize("use", ["render-only", "resume"])
@pytest.mark.parametrize("case", list(EDITS))
def test_a_hand_edit_that_mixes_runs_or_breaks_a_field_is_refused_naming_the_record(measured, tmp_path, capsys,
                                                                                   case, use):
    edit, where, expected = EDITS[case]
    bad = _edited(measured, tmp_path, edit)
    before = _files(bad)
    argv = (["profile", "--render-only", str(bad)] if use == "render-only" else
            ["profile", measured[1], "--noprogressbar", "--output_folder", str(bad)])
    line = assert_refused(main(argv), capsys, expected)
    assert where in line and str(bad / RESULTS_FILE) in line, line
    assert _files(bad) == before  # nothing written, nothing deleted
    with pytest.raises(ConfigError, match="edited/results.json"):  # the Python API: the same typed error
        load_results(bad)


@pytest.mark.slow
def test_a_copied_run_the_plan_never_measures_is_refused_on_resume(measured, tmp_path, capsys):
    """Contiguous runs 0 and 1 read as a fine file, but this configuration measures one run: the resume refuses."""
    def second_run(data):
        copy = json.loads(json.dumps(data["records"][0]))
        copy["cell"]["run"] = 1
        data["records"].append(copy)

    bad = _edited(measured, tmp_path, second_run)
    before = _files(bad)
    line = assert_refused(main(["profile", measured[1], "--noprogressbar", "--output_folder", str(bad)]), capsys,
                          "is run 1 of its cell, but this configuration measures at most 1 run(s) of a cell")
    assert "the stored record '/" in line
    assert _files(bad) == before


@pytest.mark.slow
def test_a_machine_key_deleted_is_refused_on_resume_like_a_different_one(measured, tmp_path, capsys):
    bad = _edited(measured, tmp_path, lambda d: d["machine"].pop("torch"))
    before = _files(bad)
    assert_refused(main(["profile", measured[1], "--noprogressbar", "--output_folder", str(bad)]), capsys,
                   "was measured under other conditions (torch: None there, ")
    assert _files(bad) == before


@pytest.mark.slow
def test_the_unedited_file_resumes_with_nothing_to_measure(measured, tmp_path, capsys):
    """The checks refuse the edits above, not the file as written: a resume of it measures nothing."""
    good = _edited(measured, tmp_path, lambda d: None)
    records = json.loads((good / RESULTS_FILE).read_text())["records"]
    assert main(["profile", measured[1], "--noprogressbar", "--output_folder", str(good)]) == 0
    assert "measured 0 cell(s) (0 failed), 4 already done" in capsys.readouterr().out
    assert json.loads((good / RESULTS_FILE).read_text())["records"] == records
