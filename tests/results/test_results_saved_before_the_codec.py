"""Results files written before the codec replaced the hand-written to_dict / from_dict (sbprof at 4810748, one
per job) read back and save to the same JSON; files of older formats save once migrated and then stay put."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sbprof.cli import main
from sbprof.record.results import Results

DATA = Path(__file__).resolve().parents[1] / "data"
BEFORE = sorted((DATA / "results_4810748").glob("*.json"))
OLDER = sorted((DATA / "results_546453e").glob("*.json"))


def _stored(data: dict) -> dict:
    """What a file holds as data: the derived figures and the summary are written for readers, never read back."""
    data = {k: v for k, v in data.items() if k != "summary"}
    data["records"] = [{k: v for k, v in r.items() if k != "derived"} for r in data["records"]]
    return data


def test_there_is_a_file_of_every_job_that_writes_results():
    assert {p.stem for p in BEFORE} == {"profile", "compare-models", "train", "transducer", "stream", "flops",
                                        "params", "modules"}


@pytest.mark.parametrize("path", BEFORE, ids=lambda p: p.stem)
def test_loading_then_saving_gives_the_same_json(path):
    text = path.read_text()
    data = json.loads(text)
    saved = Results.from_dict(data, path.name).to_dict()
    assert saved == _stored(data)
    # The same text too, key order included (the store writes indent=1).
    assert json.dumps(saved, indent=1) == json.dumps(_stored(data), indent=1)


@pytest.mark.parametrize("path", OLDER, ids=lambda p: p.stem)
def test_an_older_format_saves_migrated_once_then_the_same(path):
    once = Results.from_dict(json.loads(path.read_text()), path.name).to_dict()
    assert once["version"] == 3
    assert Results.from_dict(json.loads(json.dumps(once)), path.name).to_dict() == once


@pytest.mark.parametrize("path", BEFORE, ids=lambda p: p.stem)
def test_a_file_saved_before_the_codec_renders_again(path, tmp_path, capsys):
    folder = tmp_path / path.stem
    folder.mkdir()
    shutil.copy(path, folder / "results.json")
    assert main([path.stem, "--render-only", str(folder)]) == 0
    assert (folder / "report.md").read_text().strip()
    assert (folder / "results.json").read_text() == path.read_text()  # rendering never rewrites the data


@pytest.mark.parametrize("path", OLDER, ids=lambda p: p.stem)
def test_an_older_format_renders_byte_identical_to_its_migrated_save(path, tmp_path, capsys):
    """What the migration keeps is all the reports read: the file as kept and its save in today's format (read
    strictly: no key the migration kept is unknown) render the same bytes."""
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    shutil.copy(path, old / "results.json")
    saved = Results.from_dict(json.loads(path.read_text()), path.name)
    (new / "results.json").write_text(json.dumps(saved.to_dict(), indent=1))
    assert main([saved.job, "--render-only", str(old)]) == 0
    assert main([saved.job, "--render-only", str(new)]) == 0
    rendered = sorted(str(p.relative_to(old)) for p in old.rglob("*") if p.is_file() and p.name != "results.json")
    assert "report.md" in rendered
    assert rendered == sorted(str(p.relative_to(new)) for p in new.rglob("*") if p.is_file() and p.name != "results.json")
    assert all((old / name).read_bytes() == (new / name).read_bytes() for name in rendered)
