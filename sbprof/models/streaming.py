"""SpeechBrain's streaming ASR (``StreamingASR``) as sbprof builds, checks and feeds it.

- :func:`spm_decode_preserve_leading_space`: the streaming tokenizer decode
  that sbprof's local model ``streaming_asr`` names in its hyperparameters
  (``tokenizer_decode_streaming``). SpeechBrain's own fails with
  sentencepiece 0.2.x ("immutable_proto is deprecated"); this one gives the
  same text through the tokenizer's ``decode`` and ``id_to_piece``.
- :func:`check_streaming_model`: a loaded model can run the chunk loop
  (bad input otherwise: a model without streaming hyperparameters);
- :func:`trained_ranges` / :func:`check_allowed`: the chunk sizes and left
  contexts a model was trained for (its ``dynchunktrain_config_sampler``);
- :func:`chunk_samples`, :func:`right_context_samples`, :func:`final_chunks`:
  how many samples a chunk holds, how far the feature extractor looks ahead,
  and how many zero chunks flush the end of a stream (as ``transcribe_file`` does).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Tuple

from sbprof.base.errors import ConfigError

WORD_START = "\u2581"
"""SentencePiece marks a piece that starts a word with this character (``▁``)."""
STREAMING_METHODS = ("make_streaming_context", "get_chunk_size_frames", "transcribe_chunk")
"""What the chunk loop calls on a model (``speechbrain.inference.ASR.StreamingASR`` has them all)."""
UNLIMITED = -1
"""``left_context_chunks: -1``: every past chunk of the utterance (SpeechBrain's streaming encoder takes no
``None``; sbprof passes the number of chunks in the stream)."""


def spm_decode_preserve_leading_space(tokenizer: Any, hyps: List[int], context: Any) -> str:
    """Decode one stream's new tokens, keeping the space before a word that starts mid-stream.

    Decoding a chunk on its own drops the leading space of its first word
    (SentencePiece decodes as if a sentence started there); once the stream
    has emitted symbols, that space is put back. ``context`` is a
    ``speechbrain.tokenizers.SentencePiece.SentencePieceDecoderStreamingContext``.

    Example
    -------
    >>> from types import SimpleNamespace
    >>> pieces = {1: "\u2581how", 2: "\u2581are", 3: "\u2581you"}
    >>> spm = SimpleNamespace(decode=lambda ids: " ".join(pieces[i][1:] for i in ids), id_to_piece=pieces.get)
    >>> ctx = SimpleNamespace(emitted_symbol_count=0)
    >>> spm_decode_preserve_leading_space(spm, [1, 2], ctx) + spm_decode_preserve_leading_space(spm, [3], ctx)
    'how are you'
    """
    text = tokenizer.decode(list(hyps))
    if hyps:
        if context.emitted_symbol_count > 0 and tokenizer.id_to_piece(hyps[0]).startswith(WORD_START):
            text = " " + text
        context.emitted_symbol_count += len(hyps)
    return text


def check_streaming_model(model: Any, name: str) -> None:
    """Raise :class:`ConfigError` unless ``model`` (an instance or its class) has the chunk loop's methods.

    Example
    -------
    >>> check_streaming_model(object(), "m")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: model 'm' (object) cannot stream: it has no make_streaming_context, ...
    """
    missing = [m for m in STREAMING_METHODS if not callable(getattr(model, m, None))]
    if missing:
        kind = model.__name__ if isinstance(model, type) else type(model).__name__
        raise ConfigError(f"model {name!r} ({kind}) cannot stream: it has no {', '.join(missing)} "
                          "(use a speechbrain.inference.ASR.StreamingASR model)")


@dataclass(frozen=True)
class TrainedRanges:
    """The Dynamic Chunk Training ranges a model states (``dynchunktrain_config_sampler`` in its hyperparameters)."""

    chunk_size_min: int
    chunk_size_max: int
    left_context_chunks_min: int
    left_context_chunks_max: int
    unlimited_left_context: bool

    def describe(self) -> str:
        unlimited = " or unlimited (-1)" if self.unlimited_left_context else ""
        return (f"chunk sizes {self.chunk_size_min} to {self.chunk_size_max} frames, left contexts "
                f"{self.left_context_chunks_min} to {self.left_context_chunks_max} chunks{unlimited}")


def trained_ranges(hparams: Any) -> Optional[TrainedRanges]:
    """The ranges in ``hparams.dynchunktrain_config_sampler``, or ``None`` when the model states none.

    Example
    -------
    >>> from types import SimpleNamespace
    >>> sampler = SimpleNamespace(chunk_size_min=8, chunk_size_max=32, left_context_chunks_min=2,
    ...                           left_context_chunks_max=32, limited_left_context_prob=0.75)
    >>> trained_ranges(SimpleNamespace(dynchunktrain_config_sampler=sampler)).describe()
    'chunk sizes 8 to 32 frames, left contexts 2 to 32 chunks or unlimited (-1)'
    """
    sampler = getattr(hparams, "dynchunktrain_config_sampler", None)
    if sampler is None:
        return None
    return TrainedRanges(int(sampler.chunk_size_min), int(sampler.chunk_size_max),
                         int(sampler.left_context_chunks_min), int(sampler.left_context_chunks_max),
                         float(sampler.limited_left_context_prob) < 1)


def check_allowed(ranges: Optional[TrainedRanges], name: str, chunk_sizes: Iterable[int],
                  left_contexts: Iterable[int], chunk_key: str = "streaming.chunk_sizes",
                  left_key: str = "streaming.left_context_chunks") -> None:
    """Refuse a chunk size or left context outside what the model was trained for (nothing to check without ranges),
    naming the key that asked for it (``capacity.chunk_size``...).

    Example
    -------
    >>> r = TrainedRanges(8, 32, 2, 32, unlimited_left_context=True)
    >>> check_allowed(r, "m", [8, 16], [2, -1])
    >>> check_allowed(r, "m", [8], [0])
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: streaming.left_context_chunks: 0 is not allowed by model 'm': it was trained for chunk sizes 8 to 32 frames, left contexts 2 to 32 chunks or unlimited (-1)
    """
    if ranges is None:
        return
    for size in chunk_sizes:
        if not ranges.chunk_size_min <= size <= ranges.chunk_size_max:
            raise ConfigError(f"{chunk_key}: {size} is not allowed by model {name!r}: it was trained for "
                              f"{ranges.describe()}")
    for left in left_contexts:
        ok = (ranges.unlimited_left_context if left == UNLIMITED
              else ranges.left_context_chunks_min <= left <= ranges.left_context_chunks_max)
        if not ok:
            raise ConfigError(f"{left_key}: {left} is not allowed by model {name!r}: it was "
                              f"trained for {ranges.describe()}")


def chunk_samples(model: Any, chunk_size: int) -> int:
    """Samples in one chunk of ``chunk_size`` encoder frames (``get_chunk_size_frames``; 5,112 for 8 frames here)."""
    from speechbrain.utils.dynamic_chunk_training import DynChunkTrainConfig

    return int(model.get_chunk_size_frames(DynChunkTrainConfig(chunk_size, 0)))


def right_context_samples(model: Any) -> Optional[int]:
    """How far past a chunk's end the features of its last frames reach: those frames come out with the next chunk
    (``fea_streaming_extractor.get_required_padding()``); ``None`` when the model has no such extractor."""
    extractor = getattr(getattr(model, "hparams", None), "fea_streaming_extractor", None)
    padding = getattr(extractor, "get_required_padding", None)
    return int(padding()) if callable(padding) else None


def final_chunks(model: Any, samples_per_chunk: int) -> int:
    """Zero chunks fed after the last one to flush the extractor (``transcribe_file_streaming``'s count; 1 here)."""
    extractor = getattr(getattr(model, "hparams", None), "fea_streaming_extractor", None)
    count = getattr(extractor, "get_recommended_final_chunk_count", None)
    return int(count(samples_per_chunk)) if callable(count) else 1


def _holds_weights(module: Any, depth: int = 0) -> bool:
    """A module owning parameters or buffers, itself or below (read from its dicts: some streaming contexts are
    dataclass modules, unhashable, which ``parameters()`` cannot walk)."""
    if any(v is not None for v in vars(module).get("_parameters", {}).values()) or any(
            v is not None for v in vars(module).get("_buffers", {}).values()):
        return True
    return depth < 20 and any(_holds_weights(m, depth + 1) for m in vars(module).get("_modules", {}).values()
                              if m is not None)


def _span(tensor: Any) -> Tuple[int, int]:
    """The bytes of its storage a tensor addresses: from its first element to its last, ``[start, end)``."""
    size = tensor.element_size()
    if tensor.numel() == 0:
        return 0, 0
    extent = 1 + sum((n - 1) * stride for n, stride in zip(tensor.shape, tensor.stride()))
    return tensor.storage_offset() * size, (tensor.storage_offset() + extent) * size


def context_state(context: Any, max_depth: int = 12) -> Tuple[int, int]:
    """What one stream keeps between its chunks: ``(held, addressed)`` bytes of the tensors its context holds.

    *held*: each tensor storage once, whole (``untyped_storage().nbytes()``): a
    view keeps its whole storage alive, so this is the memory the stream costs
    the server. *addressed*: per storage, the bytes its tensors span (first
    to last element; overlaps once): what the model reads back, what the
    stream would cost if the cached slices were copied out of the buffers
    they were cut from. Walks the context's attributes, mappings and
    sequences. A ``torch.nn.Module`` that owns parameters or buffers is the
    model (shared by every stream) and is not walked; one without, such as
    SpeechBrain's ``TransducerGreedySearcherStreamingContext`` (the decoder's
    hidden state), is.

    Example
    -------
    >>> import torch
    >>> from types import SimpleNamespace
    >>> x = torch.zeros(1000)
    >>> context_state(SimpleNamespace(cache=x[500:], view=x[:10], layers=[{"h": torch.zeros(2, 3, dtype=torch.float64)}],
    ...                               model=torch.nn.Linear(100, 100)))
    (4048, 2088)
    """
    import torch

    storages: Dict[Tuple[int, str], Tuple[int, List[Tuple[int, int]]]] = {}
    seen_objects = set()

    def walk(obj: Any, depth: int) -> None:
        if depth > max_depth or obj is None or isinstance(obj, (str, bytes, int, float, bool)):
            return
        if isinstance(obj, torch.nn.Module) and _holds_weights(obj):
            return
        if isinstance(obj, torch.Tensor):
            storage = obj.untyped_storage()
            key = (storage.data_ptr(), obj.device.type)
            storages.setdefault(key, (storage.nbytes(), []))[1].append(_span(obj))
            return
        if id(obj) in seen_objects:
            return
        seen_objects.add(id(obj))
        if isinstance(obj, dict):
            children = list(obj.values())
        elif isinstance(obj, (list, tuple, set)):
            children = list(obj)
        elif hasattr(obj, "__dict__"):
            children = list(vars(obj).values())
        elif hasattr(obj, "__slots__"):
            children = [getattr(obj, k, None) for k in obj.__slots__]
        else:
            return
        for child in children:
            walk(child, depth + 1)

    walk(context, 0)
    held = addressed = 0
    for nbytes, spans in storages.values():
        held += nbytes
        end = 0
        for a, b in sorted(spans):  # the union of the spans
            addressed += max(0, b - max(a, end))
            end = max(end, b)
    return held, addressed
