"""What ``sbprof flops | params | modules TARGET`` counts: the target, checked before anything is built.

TARGET is a local sbprof model (``encoder_asr``...), a pretrained-interface
folder (with ``--type EncoderASR``; without it, ``--key`` picks a module of
its ``hyperparams.yaml``, default ``modules``), or a HyperPyYAML file defining
a module (``--key``, dotted for nested entries; default ``model``, or the
file's only top-level module). An interface is called as the profiling
recipe calls it, on ``batch_size`` utterances of ``audio_s`` seconds of
seeded noise; a module on random tensors of the ``input`` shapes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import List, Mapping, Optional, Tuple

from sbprof.base.checks import MAX_COUNT, check_int, nearest
from sbprof.base.errors import ConfigError
from sbprof.base.yamlconfig import top_level_keys
from sbprof.jobs.preamble import Preamble
from sbprof.models.source import ModelSource
from sbprof.record.codec import Codec

COMMANDS = ("flops", "params", "modules")


@dataclass(frozen=True)
class CountsConfig(Codec):
    """A checked count command: what to count, on which input, how to show it.

    ``input`` holds a module's input shapes; ``audio_s`` / ``batch_size`` an
    interface's batch; ``select`` / ``steps`` / ``memory`` the ``modules``
    command's; ``depth`` how deep the report's module rows go; ``json``: print
    the result as JSON instead of the report.
    """

    preamble: Preamble
    command: str
    target: str
    source: ModelSource
    input: Optional[Tuple[Tuple[int, ...], ...]] = None
    audio_s: float = 4.0
    batch_size: int = 1
    backward: bool = False
    select: Tuple[str, ...] = ("default",)
    steps: int = 3
    memory: bool = False
    depth: int = 2
    json: bool = False


def parse_shapes(text: str) -> Tuple[Tuple[int, ...], ...]:
    """``--input`` as shapes: ``"[4, 100, 80]"`` or ``"[[4, 100], [4]]"``.

    Example
    -------
    >>> parse_shapes("[4, 16]"), parse_shapes("[[2, 3], [2]]")
    (((4, 16),), ((2, 3), (2,)))
    """
    import ruamel.yaml

    try:
        value = ruamel.yaml.YAML(typ="safe", pure=True).load(text)
    except ruamel.yaml.YAMLError:
        value = None
    if isinstance(value, list) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        value = [value]
    if (not isinstance(value, list) or not value or not all(
            isinstance(s, list) and s and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in s)
            for s in value)):
        raise ConfigError(f"--input {text!r} must be a shape like [4, 100, 80] or a list of shapes of positive "
                          "integers")
    too_large = [v for s in value for v in s if v > MAX_COUNT]
    if too_large:  # torch takes it, only to fail inside the worker (an overflow), as the jobs' sizes would
        raise ConfigError(f"--input {text!r}: a size must be at most {MAX_COUNT:,}, got {too_large[0]:,}")
    return tuple(tuple(s) for s in value)


def _yaml_source(path: Path, key: Optional[str]) -> ModelSource:
    keys = top_level_keys(path)
    if key is None:
        if "model" not in keys and len(keys) != 1:
            raise ConfigError(f"{path}: name the module with --key (top-level keys: {', '.join(keys) or 'none'})")
        key = "model" if "model" in keys else keys[0]
    if key.split(".")[0] not in keys:
        raise ConfigError(f"{path}: --key {key!r}: no entry {key.split('.')[0]!r}{nearest(key, keys)}; "
                          f"top-level keys: {', '.join(keys)}")
    return ModelSource(kind="module", yaml=str(path.resolve()), module=key)


def resolve_target(target: str, type_name: Optional[str], key: Optional[str]) -> ModelSource:
    """The model a command line names (see the module docstring), checked without building it."""
    from sbprof.models.interfaces import interface_class, resolve_interface
    from sbprof.models.build import LOCAL_MODELS

    path = Path(target)
    if target in LOCAL_MODELS or (path.is_dir() and type_name):
        name = type_name or LOCAL_MODELS[target]
        interface_class(name)  # an unknown class is bad input, not a failed build
        spec = resolve_interface(name)
        common = dict(type=name, method=spec.method, args=tuple(spec.args))
        if target in LOCAL_MODELS:
            return ModelSource(kind="local_model", source=target, **common)
        return ModelSource(kind="folder", source=str(path.resolve()), **common)
    if path.is_dir():
        if not (path / "hyperparams.yaml").is_file():
            raise ConfigError(f"{target}: the folder holds no hyperparams.yaml")
        return _yaml_source(path / "hyperparams.yaml", key or "modules")
    if path.is_file():
        return _yaml_source(path, key)
    raise ConfigError(f"{target!r} is not a local model ({', '.join(LOCAL_MODELS)}), a folder or a YAML "
                      f"file{nearest(target, list(LOCAL_MODELS))}")


def check_audio(audio_s: float, batch_size: int) -> None:
    """An interface's batch: a positive finite length and batch size, within the jobs' bounds."""
    if not (isinstance(audio_s, float) and math.isfinite(audio_s) and 0 < audio_s <= MAX_COUNT):
        raise ConfigError(f"--audio_s must be a positive number of seconds up to {MAX_COUNT:,}, got {audio_s}")
    check_int(batch_size, "--batch_size", 1)
