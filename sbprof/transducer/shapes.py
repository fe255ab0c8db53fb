"""Shape sources: per-utterance ``(T, U)`` = (frames after subsampling, tokens).

- :func:`shapes_from_lhotse`: a lhotse manifest (cuts, or supervisions) plus
  a sentencepiece model;
- :func:`shapes_from_csv`: a CSV of ``duration`` (seconds) and ``text`` plus
  a sentencepiece model;
- :func:`~sbprof.models.utterances.sample_shapes`: the built-in
  LibriSpeech-like distribution (no file needed);
- :func:`load_shape_file`: a file of ready ``(T, U)`` rows (``.csv`` with a
  header, or a ``.pt`` int tensor ``(n, 2)``), e.g. the study's shape file.

Frames: ``round(duration / frame_shift)`` feature frames, then each 2x
subsampling stage is a kernel-3, stride-2 convolution without padding,
``(x - 1) // 2`` (for 4x: ``((x - 1) // 2 - 1) // 2``, as the published
shape file was made).
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from sbprof.base.errors import ConfigError

Shape = Tuple[int, int]
PathLike = Union[str, Path]


def frames_after_subsampling(duration_s: float, frame_shift_s: float = 0.01, subsampling: int = 4) -> int:
    """Encoder frames of an utterance of ``duration_s`` seconds.

    Example
    -------
    >>> frames_after_subsampling(15.0)  # 1500 feature frames -> ((1500 - 1) // 2 - 1) // 2
    374
    >>> frames_after_subsampling(1.0, subsampling=1)
    100
    """
    if subsampling < 1 or subsampling & (subsampling - 1):
        raise ConfigError(f"subsampling must be a power of two (1, 2, 4, 8, ...), got {subsampling!r}")
    frames = int(duration_s / frame_shift_s + 0.5)
    while subsampling > 1:
        frames = (frames - 1) // 2
        subsampling //= 2
    return frames


def _tokenizer(sp_model: PathLike) -> Callable[[str], int]:
    import sentencepiece

    path = Path(sp_model)
    if not path.is_file():
        raise ConfigError(f"shapes.sentencepiece_model: no such file {str(path)!r}")
    processor = sentencepiece.SentencePieceProcessor()
    processor.load(str(path))
    return lambda text: len(processor.encode(text))


def _keep(duration: float, text: str, count_tokens: Callable[[str], int], frame_shift_s: float,
          subsampling: int, where: str) -> Shape:
    frames = frames_after_subsampling(duration, frame_shift_s, subsampling)
    tokens = count_tokens(text)
    if frames < 1:
        raise ConfigError(f"{where}: {duration} s is too short for any frame after {subsampling}x subsampling")
    return frames, tokens


def shapes_from_lhotse(manifest: PathLike, sp_model: PathLike, frame_shift_s: float = 0.01,
                       subsampling: int = 4) -> List[Shape]:
    """Shapes of every cut (or supervision) in a lhotse manifest.

    A cut's transcript is its supervisions' texts joined by spaces and its
    duration the cut's own; a supervision manifest gives each segment's
    duration and text. Recording manifests hold no transcripts and are refused.
    """
    import lhotse

    path = Path(manifest)
    if not path.is_file():
        raise ConfigError(f"shapes.path: no such lhotse manifest {str(path)!r}")
    items = lhotse.load_manifest(path)
    count_tokens = _tokenizer(sp_model)
    shapes = []
    if isinstance(items, lhotse.CutSet):
        for cut in items:
            text = " ".join(s.text for s in cut.supervisions if s.text)
            shapes.append(_keep(cut.duration, text, count_tokens, frame_shift_s, subsampling, f"{path}: {cut.id}"))
    elif isinstance(items, lhotse.SupervisionSet):
        for sup in items:
            shapes.append(_keep(sup.duration, sup.text or "", count_tokens, frame_shift_s, subsampling,
                                f"{path}: {sup.id}"))
    else:
        raise ConfigError(f"shapes.path: {str(path)!r} is a {type(items).__name__}; "
                          "give a cut or supervision manifest (they carry durations and transcripts)")
    if not shapes:
        raise ConfigError(f"shapes.path: {str(path)!r} holds no utterances")
    return shapes


def shapes_from_csv(path: PathLike, sp_model: PathLike, frame_shift_s: float = 0.01,
                    subsampling: int = 4) -> List[Shape]:
    """Shapes from a CSV with a header naming a ``duration`` (seconds) and a ``text`` column."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"shapes.path: no such CSV file {str(path)!r}")
    count_tokens = _tokenizer(sp_model)
    shapes = []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = {"duration", "text"} - set(reader.fieldnames or ())
        if missing:
            raise ConfigError(f"shapes.path: {str(path)!r} lacks column(s) {sorted(missing)}; "
                              f"it has {reader.fieldnames}")
        for line, row in enumerate(reader, start=2):
            try:
                duration = float(row["duration"])
            except ValueError:
                raise ConfigError(f"{path}:{line}: duration {row['duration']!r} is not a number") from None
            shapes.append(_keep(duration, row["text"], count_tokens, frame_shift_s, subsampling, f"{path}:{line}"))
    if not shapes:
        raise ConfigError(f"shapes.path: {str(path)!r} holds no rows")
    return shapes


def load_shape_file(path: PathLike) -> List[Shape]:
    """Ready ``(T, U)`` rows: a ``.csv`` (header, then two integer columns) or a ``.pt`` tensor ``(n, 2)``."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"shapes.path: no such shape file {str(path)!r}")
    if path.suffix == ".pt":
        import pickle

        import torch

        try:  # data, never code: a pickle that would call a function is refused, not run
            rows: Any = torch.load(str(path), weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError) as exc:
            raise ConfigError(f"shapes.path: {str(path)!r} is not a tensor file sbprof reads (a tensor of rows T, U, "
                              f"loaded with weights_only=True): {' '.join(str(exc).split())[:200]}") from None
        rows = rows.tolist() if isinstance(rows, torch.Tensor) else rows
    else:
        with open(path, newline="") as f:
            reader = csv.reader(f)
            next(reader, None)
            rows = [row for row in reader if row]
    try:
        shapes = [(int(r[0]), int(r[1])) for r in rows]
    except (ValueError, IndexError, TypeError):
        raise ConfigError(f"shapes.path: {str(path)!r} must hold rows of two integers T, U") from None
    if not shapes:
        raise ConfigError(f"shapes.path: {str(path)!r} holds no rows")
    return shapes


def scale_shapes(shapes: Sequence[Shape], factor: float) -> List[Shape]:
    """Divide T and U by ``factor`` (rounded, at least 1): smaller lattices for CPU runs.

    Example
    -------
    >>> scale_shapes([(343, 71), (31, 2)], 4)
    [(86, 18), (8, 1)]
    """
    if factor <= 0:
        raise ConfigError(f"shapes.scale must be positive, got {factor!r}")
    return [(max(1, round(t / factor)), max(1, round(u / factor))) for t, u in shapes]


SOURCES = ("synthetic", "shape_file", "csv", "lhotse")


def load_shapes(source: str, path: Optional[str] = None, sentencepiece_model: Optional[str] = None,
                frame_shift_s: float = 0.01, subsampling: int = 4, num_utterances: int = 1000,
                scale: float = 1.0, seed: int = 0) -> List[Shape]:
    """Shapes from the named source (see the module docstring), divided by ``scale``.

    Example
    -------
    >>> shapes = load_shapes("synthetic", num_utterances=10, scale=4, seed=0)
    >>> len(shapes), all(1 <= t <= 170 for t, _ in shapes)
    (10, True)
    """
    from sbprof.models.utterances import sample_shapes

    if source == "synthetic":
        shapes = sample_shapes(num_utterances, seed)
    elif source == "shape_file":
        shapes = load_shape_file(path or "")
    elif source in ("csv", "lhotse"):
        if not sentencepiece_model:
            raise ConfigError(f"shapes.sentencepiece_model is needed to count tokens for source {source!r}")
        read = shapes_from_csv if source == "csv" else shapes_from_lhotse
        shapes = read(path or "", sentencepiece_model, frame_shift_s, subsampling)
    else:
        raise ConfigError(f"shapes.source must be one of {', '.join(SOURCES)}, got {source!r}")
    return scale_shapes(shapes, scale) if scale != 1 else shapes
