"""Config validation: every bad key or value names itself; the recipe's file loads."""
from __future__ import annotations

from pathlib import Path

import pytest

from sbprof.cli.overrides import parse_command_line
from sbprof.base.errors import ConfigError
from sbprof.jobs.preamble import FLAGS, VALUES
from sbprof.transducer.config import SCHEMA, load_config

RECIPE = Path(__file__).resolve().parents[2] / "transducer.yaml"


def from_command_line(*args):
    """The config the command line ``RECIPE --key value ...`` asks for."""
    path, overrides, options = parse_command_line([str(RECIPE), *args], list(SCHEMA), FLAGS, VALUES)
    return load_config(path, overrides, options)


def write(tmp_path, text):
    path = tmp_path / "t.yaml"
    path.write_text(text)
    return path


def test_recipe_file_loads_with_the_study_schedule():
    cfg = load_config(RECIPE)
    assert (cfg.preamble.warmup, cfg.preamble.measured) == (20, 20)  # the study's schedule: 10 + 10, then 20
    assert cfg.vocab_size == 500 and cfg.preamble.devices == ("cpu",)
    assert "k2" in cfg.interpreters and cfg.interpreters["k2"].endswith(".venv-k2/bin/python")
    assert cfg.shapes.source == "synthetic" and cfg.shapes.scale > 1


def test_overrides_merge_nested_keys(tmp_path):
    cfg = from_command_line("--batching", "{batch_size: 2}", "--cpu_threads", "1", "--retry_failed")
    assert cfg.batch_size == 2 and cfg.max_frames is not None and cfg.preamble.cpu_threads == (1,)
    assert cfg.search is None and cfg.preamble.retry_failed and not load_config(RECIPE).preamble.retry_failed


def test_search_can_be_switched_on_from_the_command_line():
    cfg = from_command_line("--search", "{backends: [torchaudio], budget_bytes: 1000}")
    assert cfg.search.backends == ("torchaudio",) and cfg.search.budget_bytes == 1000
    assert cfg.search.mode == "batch_size" and cfg.search.start == 1


@pytest.mark.parametrize("text, message", [
    ("backends: [reference]\nbaching: {batch_size: 2}\n", "unknown key 'baching' (did you mean 'batching'?)"),
    ("backends: [referenc]\nbatching: {batch_size: 2}\n", "unknown backend 'referenc' (did you mean 'reference'?)"),
    ("backends: [reference]\nbatching: {batch_size: 0}\n", "batching.batch_size must be an integer >= 1, got 0"),
    ("backends: [reference]\nbatching: {}\n", "batching needs batch_size, max_frames or both"),
    ("backends: [reference]\nbatching: {batch_size: 2}\nshapes: {source: wav}\n", "shapes.source must be one of"),
    ("backends: [reference]\nbatching: {batch_size: 2}\nshapes: {source: shape_file, path: no.csv}\n",
     "needs an existing file"),
    ("backends: [reference]\nbatching: {batch_size: 2}\nshapes: {source: csv, path: t.yaml}\n",
     "shapes.sentencepiece_model"),
    ("backends: [reference]\nbatching: {batch_size: 2}\nmeasured: 0\n", "measured must be an integer >= 1"),
    ("backends: [reference]\nbatching: {batch_size: 2}\nblank: 500\n", "blank 500 must be below vocab_size 500"),
    ("backends: [reference]\nbatching: {batch_size: 2}\nbackend_options: {k2_pruned: {prune: 3}}\n",
     "backend_options.k2_pruned: backend 'k2_pruned' has no option 'prune'"),
    ("backends: [reference]\nbatching: {batch_size: 2}\ndevices: tpu\n", "devices: 'tpu' is not a device"),
    ("backends: [reference]\nbatching: {batch_size: 2}\nexport_trace: 1\n", "export_trace must be True or False"),
    ("backends: [reference]\nbatching: {batch_size: 2}\ncpu_threads: true\n", "cpu_threads must be an integer >= 1"),
    ("backends: [reference]\nbatching: {batch_size: 2}\nsearch: {mode: frames}\n", "search.mode"),
])
def test_bad_values_name_the_key(tmp_path, text, message):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    assert message in str(info.value)


def test_relative_paths_resolve_against_the_file(tmp_path):
    (tmp_path / "shapes.csv").write_text("T,U\n3,1\n")
    cfg = load_config(write(tmp_path, "backends: [reference]\nbatching: {batch_size: 2}\n"
                                      "shapes: {source: shape_file, path: shapes.csv}\n"
                                      "interpreters: {k2: envs/py/bin/python}\n"))
    assert cfg.shapes.path == str(tmp_path / "shapes.csv")
    assert cfg.interpreters["k2"] == str(tmp_path / "envs" / "py" / "bin" / "python")


def test_unknown_command_line_key_is_refused_with_a_suggestion():
    with pytest.raises(ConfigError, match="unknown option --cpu_thread .*did you mean 'cpu_threads'"):
        from_command_line("--cpu_thread", "2")
    with pytest.raises(ConfigError, match="--cpu_threads needs a value"):
        from_command_line("--cpu_threads")


def test_recipe_script_stops_on_a_bad_key_with_one_line_and_exit_code_2():
    import subprocess
    import sys

    root = RECIPE.parent
    done = subprocess.run([sys.executable, "recipes/transducer.py", str(RECIPE), "--vocab", "10"],
                          capture_output=True, text=True, cwd=root,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "sbprof: error: command line: unknown option --vocab (did you mean 'vocab_size'?); YAML keys: "
        + ", ".join(SCHEMA)]


def test_subcommand_stops_on_a_bad_value_with_exit_code_2(capsys):
    from sbprof.cli import main

    assert main(["transducer", str(RECIPE), "--vocab_size", "1"]) == 2
    assert capsys.readouterr().err.strip() == f"sbprof: error: {RECIPE}: vocab_size must be an integer >= 2, got 1"
