"""Builds and loads sbprof's own small SpeechBrain models, fully offline.

Each model is described by a HyperPyYAML file kept in this package
(``hparams/<name>/hyperparams.yaml``), in the shape SpeechBrain's pretrained
interfaces expect. Building a model writes a folder that ``from_hparams`` can
load like any hub model: the hyperparameters, one ``<loadable>.ckpt`` per
entry of the pretrainer's ``loadables`` (module weights from a fixed random
seed, a SentencePiece tokenizer trained on ``tokenizer_corpus.txt``, label
encoders, normalisation statistics) and, for models that wrap another model,
that model's folder.

The weights are never trained: these models exist to be timed. Their layers,
feature extraction and decoding loops follow SpeechBrain recipes, so what they
cost is what a trained model of the same shape would cost.

Authors
 * sbprof contributors
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple, Union

import sentencepiece
import torch
from hyperpyyaml import load_hyperpyyaml
from speechbrain.dataio.encoder import CategoricalEncoder
from speechbrain.inference.interfaces import Pretrained
from speechbrain.processing.features import InputNormalization

from sbprof.base.errors import ConfigError
from sbprof.models.interfaces import interface_class

PathLike = Union[str, "os.PathLike[str]"]

#: Local model name -> SpeechBrain pretrained interface class name.
LOCAL_MODELS: Dict[str, str] = {
    "encoder_asr": "EncoderASR",
    "encoder_decoder_asr": "EncoderDecoderASR",
    "classifier": "EncoderClassifier",
    "speaker": "SpeakerRecognition",
    "enhancement": "SpectralMaskEnhancement",
    "separation": "SepformerSeparation",
    "vad": "VAD",
    "slu": "EndToEndSLU",
    "streaming_asr": "StreamingASR",
}

# Models that reuse another model's hyperparameters: SpeakerRecognition is an
# EncoderClassifier with a verification method, so it shares the ECAPA model.
_HPARAMS_OF: Dict[str, str] = {"speaker": "classifier"}

# Models that load another local model themselves:
# name -> (hparams key holding its folder, nested model name, sub-folder).
_NESTED: Dict[str, Tuple[str, str, str]] = {
    "slu": ("asr_model_source", "encoder_decoder_asr", "asr_model"),
}

#: Seed of the random initialisation of every local model.
SEED = 1234

#: Environment variable naming the default root folder of built models.
CACHE_ENV = "SBPROF_CACHE"

_PACKAGE_DIR = Path(__file__).resolve().parent
_HPARAMS_DIR = _PACKAGE_DIR / "hparams"
_TOKENIZER_CORPUS = _PACKAGE_DIR / "tokenizer_corpus.txt"
_HPARAMS_FILE = "hyperparams.yaml"

# Module construction draws from torch's global RNG, which threads share:
# seeded construction must not interleave within one process. Separate
# processes are kept apart by the atomic rename in build_local_model.
_BUILD_LOCK = threading.Lock()


def _check_name(name: str) -> None:
    """Raises a ConfigError (a ValueError) naming ``name`` and the known
    models if ``name`` is not a local model."""
    if name not in LOCAL_MODELS:
        known = ", ".join(sorted(LOCAL_MODELS))
        raise ConfigError(f"Unknown local model {name!r}; known models: {known}")


def hparams_path(name: str) -> Path:
    """Returns the packaged hyperparameter file of a local model.

    Arguments
    ---------
    name : str
        A key of ``LOCAL_MODELS``.

    Returns
    -------
    pathlib.Path
        The ``hyperparams.yaml`` the model is built from.

    Example
    -------
    >>> hparams_path("encoder_asr").name
    'hyperparams.yaml'
    """
    _check_name(name)
    return _HPARAMS_DIR / _HPARAMS_OF.get(name, name) / _HPARAMS_FILE


def default_root() -> Path:
    """Returns ``$SBPROF_CACHE`` if set, else ``~/.cache/sbprof/models``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "sbprof" / "models"


def content_hash(name: str) -> str:
    """Short hash of everything a model's folder is built from.

    Editing the hyperparameters (of the model or of a model it nests), the
    tokenizer corpus or the seed yields a new folder name, hence a rebuild.
    """
    digest = hashlib.sha256()
    digest.update(f"seed={SEED}\n".encode())
    digest.update(hparams_path(name).read_bytes())
    digest.update(_TOKENIZER_CORPUS.read_bytes())
    if name in _NESTED:
        digest.update(content_hash(_NESTED[name][1]).encode())
    return digest.hexdigest()[:12]


def model_dir(name: str, root: Optional[PathLike] = None) -> Path:
    """Returns the folder a local model is (or would be) built into.

    Arguments
    ---------
    name : str
        A key of ``LOCAL_MODELS``.
    root : str or path-like, optional
        Parent folder of all built models; defaults to ``default_root()``.

    Returns
    -------
    pathlib.Path
        ``<root>/<name>-<hash of the build inputs>``; it may not exist yet.

    Example
    -------
    >>> model_dir("vad", "/tmp/models").name.startswith("vad-")
    True
    """
    _check_name(name)
    root = Path(root).expanduser() if root is not None else default_root()
    # Absolute: SpeechBrain tells local folders from hub ids by is_dir(),
    # which a later change of working directory would break.
    return root.absolute() / f"{name}-{content_hash(name)}"


def _train_tokenizer(
    tokenizer: sentencepiece.SentencePieceProcessor,
    path: Path,
    hparams: Dict[str, Any],
) -> None:
    """Trains a SentencePiece model on the packaged corpus, writes it to path.

    The vocabulary size is the model's ``output_neurons``. Id 0 is ``<unk>``
    and no bos/eos/pad pieces are added, as in SpeechBrain's recipes, which
    reuse id 0 as the CTC blank or as bos/eos. Sentences are streamed in and
    the model written from memory so that no file path (which differs between
    builds) ends up in the serialized trainer spec. The processor object
    itself is left empty: SpeechBrain's pretrainer loads the file into it.
    """
    for key in ("output_neurons", "token_type"):
        if key not in hparams:
            raise ValueError(
                f"A SentencePiece loadable needs hparams[{key!r}], not found"
            )
    corpus = _TOKENIZER_CORPUS.read_text(encoding="utf-8").splitlines()
    writer = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter([line for line in corpus if line.strip()]),
        model_writer=writer,
        vocab_size=hparams["output_neurons"],
        model_type=hparams["token_type"],
        character_coverage=1.0,
        unk_id=0,
        bos_id=-1,
        eos_id=-1,
        pad_id=-1,
        num_threads=1,  # one thread: the same pieces on every machine
        minloglevel=2,
    )
    path.write_bytes(writer.getvalue())


def _write_labels(
    encoder: CategoricalEncoder, path: Path, hparams: Dict[str, Any]
) -> None:
    """Writes a label encoder holding ``class_labels``, one per output."""
    labels = hparams.get("class_labels")
    if labels is None:
        raise ValueError(
            "A CategoricalEncoder loadable needs hparams['class_labels']"
        )
    n_out = hparams.get("out_n_neurons", len(labels))
    if len(labels) != n_out:
        raise ValueError(
            f"hparams['class_labels'] has {len(labels)} labels but "
            f"hparams['out_n_neurons'] is {n_out}"
        )
    encoder.update_from_iterable(labels)
    encoder.save(path)


def _write_norm_statistics(
    norm: InputNormalization, path: Path, hparams: Dict[str, Any]
) -> None:
    """Writes statistics for an InputNormalization loadable.

    Only global normalisation keeps statistics. With nothing to fit them on,
    the identity (zero mean, unit deviation over ``emb_dim`` features) is
    written with a count of 0, so continued fitting starts from scratch.
    """
    if norm.norm_type == "global":
        if "emb_dim" not in hparams:
            raise ValueError(
                "A global InputNormalization loadable needs hparams['emb_dim']"
            )
        norm.glob_mean = torch.zeros(hparams["emb_dim"])
        norm.glob_std = torch.ones(hparams["emb_dim"])
        norm.count = 0
    norm._save(path)


def _write_module(
    module: torch.nn.Module, path: Path, hparams: Dict[str, Any]
) -> None:
    """Writes a module's state dict, the format SpeechBrain transfers."""
    torch.save(module.state_dict(), path)


# Checked in order: InputNormalization is a Module with its own file format.
_WRITERS: Tuple[Tuple[type, Callable[[Any, Path, Dict[str, Any]], None]], ...] = (
    (InputNormalization, _write_norm_statistics),
    (torch.nn.Module, _write_module),
    (sentencepiece.SentencePieceProcessor, _train_tokenizer),
    (CategoricalEncoder, _write_labels),
)


def _write_model(name: str, folder: Path) -> None:
    """Writes every file of a local model into an existing empty folder."""
    source = hparams_path(name)
    shutil.copyfile(source, folder / _HPARAMS_FILE)
    overrides = {}
    if name in _NESTED:
        key, nested, subfolder = _NESTED[name]
        (folder / subfolder).mkdir()
        _write_model(nested, folder / subfolder)
        overrides[key] = str(folder / subfolder)

    # Seed, then construct: construction order (the file's order) fixes which
    # random numbers each parameter gets. fork_rng leaves the caller's RNG as
    # it was.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        with open(source, encoding="utf-8") as fin:
            hparams = load_hyperpyyaml(fin, overrides)

    for key, obj in hparams["pretrainer"].loadables.items():
        for kind, writer in _WRITERS:
            if isinstance(obj, kind):
                writer(obj, folder / f"{key}.ckpt", hparams)
                break
        else:
            raise TypeError(
                f"Model {name!r}: no way to write loadable {key!r} of type "
                f"{type(obj).__name__}"
            )


def _publish(staging: Path, folder: Path) -> None:
    """Moves a finished build into place, atomically.

    If another process published the same model first, its folder is kept
    (builds are deterministic, so both are the same) and ``staging`` is left
    for the caller to remove.
    """
    # mkdtemp creates private folders; built models are ordinary files.
    staging.chmod(0o755)
    try:
        os.replace(staging, folder)
    except OSError:
        if not folder.is_dir():
            raise


def build_local_model(name: str, root: Optional[PathLike] = None) -> Path:
    """Builds a local model's folder unless it already exists.

    The folder is written under a temporary name in the same parent and then
    renamed into place, so it either exists complete or not at all, and
    processes building the same model at once end up sharing one folder.
    ``name`` and ``root`` are those of :func:`model_dir`; returns the model
    folder, loadable with ``<Interface>.from_hparams``.

    Example
    -------
    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> folder = build_local_model("vad", root)
    >>> sorted(p.name for p in folder.iterdir())
    ['hyperparams.yaml', 'model.ckpt']
    >>> build_local_model("vad", root) == folder
    True
    """
    folder = model_dir(name, root)
    if folder.is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _BUILD_LOCK:
        if folder.is_dir():  # built by another thread while we waited
            return folder
        staging = Path(
            tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent)
        )
        try:
            _write_model(name, staging)
            _publish(staging, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return folder


def _explicit_device(device: str) -> str:
    """Gives a bare ``"cuda"`` its current index: SpeechBrain warns about a
    CUDA device without one and then picks device 0, not the current one."""
    parsed = torch.device(device)
    if parsed.type == "cuda" and parsed.index is None:
        return f"cuda:{torch.cuda.current_device()}"
    return device


def load_local_model(
    name: str, device: str = "cpu", root: Optional[PathLike] = None
) -> Pretrained:
    """Builds a local model if needed and loads it through its interface.

    Loading goes through SpeechBrain's own machinery,
    ``<Interface>.from_hparams``, with the model folder as both source and
    savedir: every file is already there, so nothing is fetched, linked or
    written.

    Arguments
    ---------
    name : str
        A key of ``LOCAL_MODELS``.
    device : str
        Device to run the model on, e.g. ``"cpu"`` or ``"cuda:0"``.
    root : str or path-like, optional
        Parent folder of all built models; defaults to ``default_root()``.

    Returns
    -------
    speechbrain.inference.interfaces.Pretrained
        An instance of ``LOCAL_MODELS[name]``, in eval mode.

    Example
    -------
    >>> import tempfile
    >>> vad = load_local_model("vad", root=tempfile.mkdtemp())
    >>> type(vad).__name__
    'VAD'
    """
    folder = build_local_model(name, root)
    overrides = {}
    if name in _NESTED:
        key, _, subfolder = _NESTED[name]
        overrides[key] = str(folder / subfolder)
    return interface_class(LOCAL_MODELS[name]).from_hparams(
        source=str(folder),
        savedir=str(folder),
        overrides=overrides,
        run_opts={"device": _explicit_device(device)},
    )
