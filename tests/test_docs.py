"""Docs that cannot drift: every command line and every YAML block of README.md and docs/*.md goes through the
command line's own parsing and the job's own configuration checks (nothing is measured), so a renamed key, a
removed option or a moved file fails here.

A command line is a line of a code block (fenced, or indented by four spaces) that starts with ``sbprof``,
``sbprof-profile``, ``python recipes/...`` or ``torchrun ... -m sbprof``; its job's configuration is loaded as the
command would load it, from the repository's root. A YAML block is a job's keys: they override the job's example
configuration (``profile.yaml``...), as ``--key value`` would. A file the docs name only as an example of the
user's own (``train.py``, ``path/to/...``, ``mypackage``, ``results/...`` written by an earlier command) may not
exist: a refusal that names it is taken as the placeholder it is; any other refusal is drift.
"""
from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

import pytest
import torch
import yaml

from helpers.fake_interfaces import use_test_environment
from helpers.paths import ROOT
from sbprof.base.errors import ConfigError
from sbprof.cli.tools import GATE_VALUES, gate_parser, joined_values, merge_parser, parse_threshold
from sbprof.registry import JOBS

PLACEHOLDER = re.compile(r"\b(?:train\.py|hparams\.yaml|my_loop\.py|model\.yaml|power\.csv|mypackage[\w.]*)|"
                         r"path/to/[\w./-]*|^results/[\w./-]*|/work/envs/[\w./-]*")
"""The user's own files and names in the docs' examples, and the folders an earlier command writes."""
DOC_JOBS = {"profile.md": "profile", "cluster.md": "profile", "compare.md": "compare-models",
            "training.md": "train", "stream.md": "stream", "transducer.md": "transducer"}
"""Whose keys a page's YAML blocks are."""
EXAMPLES = {"profile": "profile.yaml", "compare-models": "compare.yaml", "train": "train_profile.yaml",
            "stream": "stream.yaml", "transducer": "transducer.yaml"}
"""Each YAML job's example configuration, at the repository's root."""
STARTS = ("sbprof ", "sbprof-profile ", "python recipes/", "torchrun ")


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")
    monkeypatch.chdir(ROOT)  # the docs' commands run from the repository's root


def doc_files(root: Path) -> List[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def code_blocks(text: str) -> Iterator[Tuple[str, List[str]]]:
    """``(language, lines)`` of each fenced block, and of each block indented by four spaces (language ``""``)."""
    lines, i = text.splitlines(), 0
    while i < len(lines):
        fence = re.match(r"\s*```(\w*)", lines[i])
        if fence:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```")), len(lines))
            yield fence.group(1), lines[i + 1:end]
            i = end + 1
        elif lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            end = next((j for j in range(i, len(lines)) if lines[j].strip() and not lines[j].startswith("    ")),
                       len(lines))
            yield "", [line[4:] for line in lines[i:end]]
            i = end
        else:
            i += 1


def command_lines(text: str) -> List[str]:
    """Every command line of the code blocks of ``text`` (continuations joined), its comment left out."""
    found = []
    for language, lines in code_blocks(text):
        if language == "yaml":
            continue
        joined = "\n".join(lines).replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith(STARTS):
                found.append(line)
    return found


def yaml_blocks(text: str) -> List[str]:
    return ["\n".join(lines) for language, lines in code_blocks(text) if language == "yaml"]


def _argv(line: str) -> Optional[Tuple[str, List[str]]]:
    """``(job or tool, its argv)`` of a command line; ``None`` for a usage line (``[--option ...]``) or a command
    that is not sbprof's (``torchrun train.py``)."""
    words = shlex.split(line, comments=True)
    if any(w.startswith("[-") for w in words):
        return None
    if words[0] == "torchrun":  # sbprof's line under torchrun; a script of the user's own is not sbprof's
        if "-m" not in words or words[words.index("-m") + 1] != "sbprof":
            return None
        words = words[words.index("-m") + 1:]
    if words[0] == "sbprof-profile":
        return "profile", words[1:]
    if words[0] == "python":
        recipe = ROOT / words[1]
        if not recipe.is_file():
            raise ConfigError(f"{words[1]}: no such recipe")
        return re.search(r'run_recipe\(__file__, "([\w-]+)"', recipe.read_text()).group(1), words[2:]
    return words[1], words[2:]


def _on_this_machine(argv: List[str]) -> List[str]:
    """``--device cuda:N`` checked as ``cpu`` where CUDA is absent (the docs are checked on CPU machines too)."""
    if torch.cuda.is_available():
        return argv
    return ["cpu" if i and argv[i - 1] == "--device" and a.startswith("cuda") else a for i, a in enumerate(argv)]


def check_command(line: str) -> None:
    """Parse ``line`` as the command would and load its job's configuration; ConfigError (or SystemExit, from
    argparse) when the command would refuse it."""
    from sbprof.cli.job import command_line

    asked = _argv(line)
    if asked is None:
        return
    name, argv = asked[0], _on_this_machine(asked[1])
    if name == "merge":
        merge_parser("sbprof merge").parse_args(argv)
        return
    if name in ("gate", "compare"):
        parse_threshold(gate_parser(f"sbprof {name}").parse_args(joined_values(argv, GATE_VALUES)).threshold)
        return
    if name not in JOBS:
        raise ConfigError(f"no subcommand {name!r}")
    entry = JOBS[name]
    if name == "run":
        from sbprof.cli import vary
        from sbprof.script import VARY

        if vary.handles(argv):  # sbprof run --vary: the comparison's own parsing and checks
            entry = VARY
    invocation = entry.parse(argv, f"sbprof {name}") if entry.parse is not None else command_line(
        entry, argv, f"sbprof {name}")
    if invocation.render_only is None:
        entry.load_config(invocation.source, invocation.overrides, invocation.options)


def check_yaml(page: str, block: str) -> None:
    """The block's keys as overrides of its page's job's example configuration."""
    job = DOC_JOBS[page]
    JOBS[job].load_config(EXAMPLES[job], yaml.safe_load(block), {})


def drifts(root: Path) -> List[str]:
    """Every command line and YAML block of the docs under ``root`` that its command would refuse, with why."""
    found = []
    for doc in doc_files(root):
        text = doc.read_text()
        checks = [(line, line, lambda line=line: check_command(line)) for line in command_lines(text)]
        checks += [(block.splitlines()[0] + " ...", block, lambda block=block: check_yaml(doc.name, block))
                   for block in yaml_blocks(text)]
        for what, said, check in checks:
            try:
                check()
            except (ConfigError, SystemExit, KeyError) as exc:
                named = PLACEHOLDER.search(str(exc))
                if named is None or named.group(0) not in said:  # a refusal naming the user's own file: no drift
                    found.append(f"{doc.relative_to(root)}: {what} -> {type(exc).__name__}: {exc}")
    return found


def test_every_command_line_and_yaml_block_of_the_docs_is_accepted(capsys):
    lines = [line for doc in doc_files(ROOT) for line in command_lines(doc.read_text())]
    blocks = [block for doc in doc_files(ROOT) for block in yaml_blocks(doc.read_text())]
    assert len(lines) > 40 and len(blocks) >= 5  # the docs' examples were found, not skipped
    assert drifts(ROOT) == []


def test_a_renamed_key_or_option_in_a_copy_of_the_docs_fails(tmp_path, capsys):
    copy = tmp_path / "docs_copy"
    (copy / "docs").mkdir(parents=True)
    shutil.copy(ROOT / "README.md", copy / "README.md")
    for doc in (ROOT / "docs").glob("*.md"):
        shutil.copy(doc, copy / "docs" / doc.name)
    profile = copy / "docs" / "profile.md"
    text = profile.read_text()
    assert "    batch_sizes: [1, 4, 8]\n" in text and "--profiling_dimensions" in (copy / "README.md").read_text()
    profile.write_text(text.replace("    batch_sizes: [1, 4, 8]\n", "    batch_size: [1, 4, 8]\n"))
    readme = copy / "README.md"
    readme.write_text(readme.read_text().replace("--profiling_dimensions", "--profiling_dimension"))
    found = drifts(copy)
    assert len(found) >= 2, found
    assert any(f.startswith("docs/profile.md: pretrained_model: ...") and "batch_size" in f for f in found), found
    assert any(f.startswith("README.md: ") and "--profiling_dimension" in f for f in found), found
