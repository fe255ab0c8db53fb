"""The stream job's configuration (``stream.yaml``): HyperPyYAML, checked into a :class:`StreamConfig`.

Every mistake the file can hold stops the run before any worker starts, with
one :class:`~sbprof.base.errors.ConfigError` naming the file, the key and the
value: an unknown key, a chunk size or stream count that is not a positive
integer, a left context below -1, a missing or silent recording, a model type
that cannot stream. What only the loaded model can tell (a model without
streaming hyperparameters, a chunk size or left context it was not trained
for) is checked by the worker before any cell, with the same one line and
exit code 2.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from sbprof.models.audio import check_example_audio
from sbprof.base.checks import MAX_COUNT, check_flag, check_int, check_list, is_int, is_positive_number
from sbprof.base.errors import ConfigError
from sbprof.jobs.preamble import SCHEMA as PREAMBLE, Defaults, Preamble, Repeats, check_preamble, load_tree
from sbprof.models.source import ModelSource, check_source
from sbprof.record.codec import Codec

MODEL_KEYS = ("source", "type", "overrides")
STREAMING_KEYS = ("chunk_sizes", "left_context_chunks", "streams", "audio", "audio_s", "max_backlog_s", "traffic",
                  "alignment")
CAPACITY_KEYS = ("chunk_size", "left_context_chunks", "max_streams", "p99_delay_ms", "boundary_probes")
TRAFFIC = ("spread", "poisson", "aligned")
"""``streaming.traffic``: how sessions are laid out in time (:mod:`sbprof.stream.session`)."""
SCHEMA: Dict[str, Any] = {**PREAMBLE, "model": {k: None for k in MODEL_KEYS},
                          "streaming": {k: None for k in STREAMING_KEYS},
                          "capacity": {k: None for k in CAPACITY_KEYS}, "offline": None}
DEFAULTS = Defaults(warmup=2, measured=1, output_folder="results/stream", repeats=Repeats(runs=1))
"""``warmup``: unmeasured chunks on a throw-away stream before each cell; ``measured``: passes over the utterance."""
CHUNK_METHOD = "transcribe_chunk"
DEFAULT_MAX_STREAMS = 64
DEFAULT_BOUNDARY_PROBES = 3
DEFAULT_MAX_BACKLOG_S = 2.0


@dataclass(frozen=True)
class Streaming:
    """The grid (``streaming`` in the YAML) and the utterance every stream sends.

    ``left_context_chunks`` -1 is unlimited (every past chunk). ``audio`` is a
    recording's absolute path or ``None`` (seeded noise); ``audio_s`` tiles or
    cuts it to that length (``None``: as it is). A session falling
    ``max_backlog_s`` behind stops (``None``: never).
    """

    chunk_sizes: Tuple[int, ...]
    left_context_chunks: Tuple[int, ...]
    streams: Tuple[int, ...]
    audio: Optional[str]
    audio_s: Optional[float]
    max_backlog_s: Optional[float] = DEFAULT_MAX_BACKLOG_S
    traffic: str = "spread"
    alignment: Optional[Tuple[float, ...]] = None


@dataclass(frozen=True)
class Capacity:
    """The capacity search (``capacity`` in the YAML): per chunk size and left context (each a number or a list:
    one search per pair), the largest stream count up to ``max_streams`` whose p99 delay stays within
    ``p99_delay_ms`` (``None``: one chunk duration) and does not grow along the utterance; each count at the
    boundary probed ``boundary_probes`` times in all (1: once, no range)."""

    chunk_size: Tuple[int, ...]
    left_context_chunks: Tuple[int, ...]
    max_streams: int = DEFAULT_MAX_STREAMS
    p99_delay_ms: Optional[float] = None
    boundary_probes: int = DEFAULT_BOUNDARY_PROBES


@dataclass(frozen=True)
class StreamConfig(Codec):
    """A validated stream job: the shared preamble, the model, the grid, the capacity search, the offline call."""

    preamble: Preamble
    model: ModelSource
    streaming: Streaming
    capacity: Optional[Capacity]
    offline: bool = True


def check_left_contexts(value: Any, key: str, file: str) -> Tuple[int, ...]:
    """Distinct integers >= 0, or -1 for unlimited.

    Example
    -------
    >>> check_left_contexts([2, -1], "streaming.left_context_chunks", "s.yaml")
    (2, -1)
    >>> check_left_contexts([-2], "streaming.left_context_chunks", "s.yaml")
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: s.yaml: streaming.left_context_chunks must hold integers >= 0 (past chunks) or -1 (unlimited), got -2 in [-2]
    """
    items = value if isinstance(value, (list, tuple)) else [value]
    if not items:
        raise ConfigError(f"{file}: {key} must be a non-empty list of integers, got {value!r}")
    for v in items:
        if not (is_int(v) and v >= -1):
            raise ConfigError(f"{file}: {key} must hold integers >= 0 (past chunks) or -1 (unlimited), got {v!r} "
                              f"in {list(items)!r}")
    if len(set(items)) != len(items):
        raise ConfigError(f"{file}: {key} lists a value twice: {list(items)!r}")
    return tuple(items)


def _model(tree: Any, file: str, base: Path) -> ModelSource:
    from sbprof.models.interfaces import interface_class
    from sbprof.models.streaming import check_streaming_model

    where = f"{file}: model"
    if not isinstance(tree, Mapping) or tree.get("source") is None or tree.get("type") is None:
        raise ConfigError(f"{where} needs 'source' (a local model, a folder or a hub id) and 'type' "
                          "(StreamingASR, or a dotted path to a subclass)")
    try:
        check_streaming_model(interface_class(tree["type"]), str(tree["source"]))
    except ConfigError as exc:
        raise ConfigError(f"{where}.type: {exc}") from None
    # The job calls transcribe_chunk on chunks it makes: no method or args to choose.
    return check_source({**tree, "method": CHUNK_METHOD, "args": []}, where, base)


def _streaming(tree: Any, file: str, base: Path) -> Streaming:
    if not isinstance(tree, Mapping) or any(tree.get(k) is None for k in ("chunk_sizes", "left_context_chunks")):
        raise ConfigError(f"{file}: streaming needs chunk_sizes and left_context_chunks")
    audio = check_example_audio(tree.get("audio", "example"), file, "streaming.audio", base)
    audio_s = tree.get("audio_s")
    if audio_s is not None and not (is_positive_number(audio_s) and audio_s <= MAX_COUNT):
        raise ConfigError(f"{file}: streaming.audio_s must be null or a positive number of seconds up to "
                          f"{MAX_COUNT:,}, got {audio_s!r}")
    if audio is None and audio_s is None:
        raise ConfigError(f"{file}: streaming.audio_s: seeded noise (audio: null) needs a length in seconds")
    backlog = tree.get("max_backlog_s", DEFAULT_MAX_BACKLOG_S)
    if backlog is not None and not (is_positive_number(backlog) and backlog <= MAX_COUNT):
        raise ConfigError(f"{file}: streaming.max_backlog_s must be null or a positive number of seconds, "
                          f"got {backlog!r}")
    traffic = tree.get("traffic", "spread")
    if traffic not in TRAFFIC:
        raise ConfigError(f"{file}: streaming.traffic must be one of {', '.join(TRAFFIC)}, got {traffic!r}")
    return Streaming(
        traffic=traffic, alignment=_alignment(tree.get("alignment"), file, base),
        chunk_sizes=check_list(tree["chunk_sizes"], "streaming.chunk_sizes", integers=True, where=file),
        left_context_chunks=check_left_contexts(tree["left_context_chunks"], "streaming.left_context_chunks", file),
        streams=check_list(tree.get("streams", [1]), "streaming.streams", integers=True, where=file),
        audio=audio, audio_s=None if audio_s is None else float(audio_s),
        max_backlog_s=None if backlog is None else float(backlog))


def _alignment(value: Any, file: str, base: Path) -> Optional[Tuple[float, ...]]:
    """``streaming.alignment``: the reference end time (seconds) of each unit (token) of the utterance, as a list
    or a text file of numbers (whitespace-separated; a file's relative path resolves against the config's folder)."""
    key = "streaming.alignment"
    if value is None:
        return None
    if isinstance(value, str):
        path = Path(value) if Path(value).is_absolute() else base / value
        if not path.is_file():
            raise ConfigError(f"{file}: {key}: no such file {value!r} (a list of end times in seconds, or a text "
                              "file of them)")
        if path.stat().st_size > 1 << 20:
            raise ConfigError(f"{file}: {key}: {value!r} is larger than 1 MiB")
        words = path.read_text(errors="replace").split()
        try:
            value = [float(w) for w in words]
        except ValueError:
            raise ConfigError(f"{file}: {key}: {value!r} must hold only numbers (end times in seconds)") from None
    if not isinstance(value, (list, tuple)) or not value or not all(is_positive_number(v) for v in value):
        raise ConfigError(f"{file}: {key} must be a non-empty list of end times in seconds (positive numbers), "
                          f"or a file of them, got {value!r}")
    if any(b < a for a, b in zip(value, value[1:])):
        raise ConfigError(f"{file}: {key}: the end times must not decrease")
    return tuple(float(v) for v in value)


def _capacity(tree: Any, file: str, streaming: Streaming) -> Optional[Capacity]:
    if tree is None:
        return None
    if not isinstance(tree, Mapping):
        raise ConfigError(f"{file}: capacity must be null or a mapping with chunk_size, left_context_chunks, "
                          f"max_streams, p99_delay_ms, boundary_probes; got {tree!r}")
    chunks = tree.get("chunk_size", streaming.chunk_sizes[0])
    chunks = check_list(chunks if isinstance(chunks, (list, tuple)) else [chunks], "capacity.chunk_size",
                        integers=True, where=file)
    lefts = check_left_contexts(tree.get("left_context_chunks", streaming.left_context_chunks[0]),
                                "capacity.left_context_chunks", file)
    target = tree.get("p99_delay_ms")
    if target is not None and not is_positive_number(target):
        raise ConfigError(f"{file}: capacity.p99_delay_ms must be null (one chunk duration) or a positive number "
                          f"of milliseconds, got {target!r}")
    return Capacity(chunk_size=tuple(chunks), left_context_chunks=lefts,
                    max_streams=check_int(tree.get("max_streams", DEFAULT_MAX_STREAMS), "capacity.max_streams", 1,
                                          file), p99_delay_ms=None if target is None else float(target),
                    boundary_probes=check_int(tree.get("boundary_probes", DEFAULT_BOUNDARY_PROBES),
                                              "capacity.boundary_probes", 1, file))


def load_config(path: Union[str, Path], overrides: Optional[Mapping[str, Any]] = None,
                run_options: Optional[Mapping[str, Any]] = None) -> StreamConfig:
    """A stream job's YAML with the command line's overrides and run options, checked (see the module docstring).

    Example
    -------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "s.yaml").write_text("model: {source: streaming_asr, type: StreamingASR}\\n"
    ...     "streaming: {chunk_sizes: [0], left_context_chunks: [2]}\\n")
    >>> load_config(d / "s.yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: ...s.yaml: streaming.chunk_sizes must hold only positive integers, got 0 in [0]
    """
    tree = load_tree(path, overrides, SCHEMA)
    file, base = str(path), Path(path).resolve().parent
    streaming = _streaming(tree.get("streaming"), file, base)
    return StreamConfig(preamble=check_preamble(tree, file, run_options, DEFAULTS),
                        model=_model(tree.get("model"), file, base), streaming=streaming,
                        capacity=_capacity(tree.get("capacity"), file, streaming),
                        offline=check_flag(tree.get("offline", True), "offline", file))
