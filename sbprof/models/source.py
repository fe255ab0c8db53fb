"""Where a model comes from, for every job: checked in the parent, fingerprinted, loaded in a worker.

A model is either

- a **pretrained interface**: ``source`` (a local sbprof model, a folder
  holding ``hyperparams.yaml``, or a hub id ``owner/name``, which needs the
  network) and ``type`` (a ``speechbrain.inference`` class or a dotted path),
  with an optional ``method`` and ``args`` for a class without a built-in
  call (:mod:`sbprof.models.interfaces`); or
- a **module** built by HyperPyYAML: ``yaml`` (the file) and ``module`` (the
  key that builds it, dotted for nested entries), called on ``input: wavs``
  (``[batch, samples]``) or ``input: features`` with ``features: N``
  (``[batch, frames, N]``).

``overrides`` are HyperPyYAML overrides applied when loading (one model under
several hyperparameters). :func:`check_source` checks all this before any
worker starts; :func:`fingerprint` identifies the build, so results of two
builds are never mixed; :func:`load_source` loads it on a device.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from sbprof.base.checks import check_int, check_text, nearest
from sbprof.base.errors import ConfigError
from sbprof.base.yamlconfig import resolve_path, top_level_keys
from sbprof.record.codec import Codec

SOURCE_KEYS = ("source", "type", "method", "args", "overrides", "yaml", "module", "input", "features")
MODULE_INPUTS = ("wavs", "features")
DEFAULT_SAMPLE_RATE = 16000
_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


@dataclass(frozen=True)
class ModelSource(Codec):
    """A checked model source (see the module docstring); ``kind`` is local_model, folder, hub or module.

    Example
    -------
    >>> s = ModelSource(kind="local_model", source="encoder_asr", type="EncoderASR")
    >>> ModelSource.from_dict(s.to_dict()) == s, s.name, s.is_module
    (True, 'encoder_asr', False)
    """

    kind: str
    source: Optional[str] = None
    type: Optional[str] = None
    method: Optional[str] = None
    args: Optional[Tuple[str, ...]] = None
    overrides: Dict[str, Any] = field(default_factory=dict, hash=False)
    yaml: Optional[str] = None
    module: Optional[str] = None
    input: str = "wavs"
    features: Optional[int] = None

    @property
    def is_module(self) -> bool:
        return self.kind == "module"

    @property
    def name(self) -> str:
        """What a record's ``Cell.model`` names: the source, or the YAML file and its key."""
        return f"{self.yaml}:{self.module}" if self.is_module else str(self.source)

    def describe(self) -> Dict[str, Any]:
        """The fields that say something, for a results file's ``models`` block."""
        d = {k: v for k, v in self.to_dict().items() if v not in (None, {})}
        if not self.is_module:
            d.pop("input")
        return d


def _interface(tree: Mapping[str, Any], where: str, base: Path, overrides: Dict[str, Any]) -> ModelSource:
    from sbprof.models.interfaces import interface_class, resolve_interface
    from sbprof.models.build import LOCAL_MODELS

    source, type_name = check_text(tree, "source", where), check_text(tree, "type", where)
    if source is None or type_name is None:
        raise ConfigError(f"{where}: a pretrained interface needs both 'source' and 'type'")
    try:
        # The class first: a misspelt type is "no such class", not "give method and args".
        cls = interface_class(type_name)
        spec = resolve_interface(type_name, method=check_text(tree, "method", where), args=tree.get("args"))
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if not callable(getattr(cls, "from_hparams", None)):
        raise ConfigError(f"{where}.type {type_name!r} has no from_hparams() to load it with")
    if not callable(getattr(cls, spec.method, None)):
        raise ConfigError(f"{where}.method: {type_name} has no method {spec.method!r}")
    common = dict(type=type_name, method=spec.method, args=tuple(spec.args), overrides=overrides)
    if source in LOCAL_MODELS:
        if "." not in type_name and type_name != LOCAL_MODELS[source]:
            raise ConfigError(f"{where}.type {type_name!r} does not fit local model {source!r}, built as "
                              f"{LOCAL_MODELS[source]}")
        from sbprof.models.build import hparams_path

        check_overrides(overrides, hparams_path(source), where)
        return ModelSource(kind="local_model", source=source, **common)
    folder = resolve_path(source, base)
    if folder.is_dir():
        if not (folder / "hyperparams.yaml").is_file():
            raise ConfigError(f"{where}.source folder {str(folder)!r} holds no hyperparams.yaml")
        check_overrides(overrides, folder / "hyperparams.yaml", where)
        return ModelSource(kind="folder", source=str(folder.resolve()), **common)
    if _HUB_ID.match(source) and not source.startswith((".", "/")):
        return ModelSource(kind="hub", source=source, **common)
    raise ConfigError(f"{where}.source {source!r} is not a local model ({', '.join(LOCAL_MODELS)}), an existing "
                      f"folder ({str(folder)!r} is none), or a hub id owner/name{nearest(source, list(LOCAL_MODELS))}")


def _module(tree: Mapping[str, Any], where: str, base: Path, overrides: Dict[str, Any]) -> ModelSource:
    file, key = check_text(tree, "yaml", where), check_text(tree, "module", where)
    if key is None:
        raise ConfigError(f"{where}: a module needs 'module', the key of its YAML file that builds it")
    path = resolve_path(file, base)
    if not path.is_file():
        raise ConfigError(f"{where}.yaml: no such file {str(path)!r}")
    kind = tree.get("input", "wavs")
    if kind not in MODULE_INPUTS:
        raise ConfigError(f"{where}.input must be one of {', '.join(MODULE_INPUTS)}, got {kind!r}")
    check_overrides(overrides, path, where)
    features = tree.get("features")
    if kind == "features":
        features = check_int(features, f"{where}.features", 1)
    elif features is not None:
        raise ConfigError(f"{where}.features is only for input: features")
    return ModelSource(kind="module", yaml=str(path.resolve()), module=key, input=kind, features=features,
                       overrides=overrides)


def check_overrides(overrides: Mapping[str, Any], file: Path, where: str) -> None:
    """Refuse an override of a hyperparameter that ``file`` does not hold, naming it: HyperPyYAML refuses it too,
    but only when the model loads, in the worker (an error record, exit 1, instead of one line and exit 2).

    Example
    -------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "hyperparams.yaml"
    >>> _ = p.write_text("beam_size: 4\\nlm_weight: 0.5\\n")
    >>> check_overrides({"beam_szie": 1}, p, "c.yaml: variants[0]")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: c.yaml: variants[0].overrides: 'beam_szie' is not a hyperparameter of .../hyperparams.yaml (did you mean 'beam_size'?); its keys: beam_size, lm_weight
    """
    if not overrides:
        return
    keys = top_level_keys(file)
    unknown = [k for k in overrides if str(k) not in keys]
    if unknown:
        shown = ", ".join(keys[:20]) + (", ..." if len(keys) > 20 else "")
        raise ConfigError(f"{where}.overrides: {str(unknown[0])!r} is not a hyperparameter of {file}"
                          f"{nearest(str(unknown[0]), keys)}; its keys: {shown}")


def check_source(tree: Any, where: str, base: Path) -> ModelSource:
    """A model source from its YAML mapping (see the module docstring); one clear line for any mistake.

    ``where`` names the mapping in messages (``profile.yaml: pretrained_model``);
    relative paths are taken against ``base`` (the YAML file's folder).

    Example
    -------
    >>> check_source({"source": "encoder_asr", "type": "EncoderASR"}, "p.yaml: model", Path(".")).kind
    'local_model'
    >>> check_source({"source": "encoder_asr"}, "p.yaml: model", Path("."))
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: p.yaml: model: a pretrained interface needs both 'source' and 'type'
    """
    if not isinstance(tree, Mapping):
        raise ConfigError(f"{where} must be a mapping (source/type, or yaml/module), got {tree!r}")
    unknown = [k for k in tree if k not in SOURCE_KEYS]
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}{nearest(str(unknown[0]), SOURCE_KEYS)}; known keys "
                          f"here: {', '.join(SOURCE_KEYS)}")
    overrides = tree.get("overrides") or {}
    if not isinstance(overrides, Mapping):
        raise ConfigError(f"{where}.overrides must be a mapping of hyperparameters, got {overrides!r}")
    if tree.get("yaml") is not None:
        if tree.get("source") is not None:
            raise ConfigError(f"{where}: give either source/type (a pretrained interface) or yaml/module (a module), "
                              "not both")
        return _module(tree, where, base, dict(overrides))
    stray = [k for k in ("module", "input", "features") if tree.get(k) is not None]
    if stray:
        raise ConfigError(f"{where}: {', '.join(stray)} apply to modules (with 'yaml') only")
    return _interface(tree, where, base, dict(overrides))


def _digest(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def fingerprint(src: ModelSource) -> str:
    """Identifies the build of a model: a local model's content hash, a folder's files, a module's YAML, a hub id."""
    if src.kind == "local_model":
        from sbprof.models.build import content_hash

        return f"local:{content_hash(src.source)}"
    if src.kind == "folder":
        folder = Path(src.source)
        listing = "".join(f"{p.relative_to(folder)}:{p.stat().st_size}\n"
                          for p in sorted(folder.rglob("*")) if p.is_file())
        return f"folder:{hashlib.sha256(listing.encode()).hexdigest()[:8]}{_digest(folder / 'hyperparams.yaml')}"
    if src.kind == "module":
        return f"yaml:{_digest(Path(src.yaml))}"
    return f"hub:{src.source}"


def load_interface(src: ModelSource, device: str, download_folder: str) -> Any:
    """A pretrained interface on ``device``, through SpeechBrain's ``from_hparams`` (a hub model is fetched into
    ``download_folder``, never elsewhere)."""
    from sbprof.models.interfaces import interface_class
    from sbprof.models.build import LOCAL_MODELS, build_local_model, load_local_model

    if src.kind == "local_model" and src.type == LOCAL_MODELS[src.source] and not src.overrides:
        return load_local_model(src.source, device=device)
    if src.kind == "local_model":
        source = savedir = str(build_local_model(src.source))
    elif src.kind == "folder":
        source = savedir = src.source
    else:
        source = src.source
        savedir = str(Path(download_folder) / "pretrained_models" / src.source.replace("/", "--"))
    return interface_class(src.type).from_hparams(source=source, savedir=savedir, run_opts={"device": device},
                                                  overrides=dict(src.overrides))


def build_module(src: ModelSource, seed: int) -> Tuple[Any, int]:
    """The module a YAML file builds (torch seeded: every run builds the same weights), and its sample rate."""
    import torch
    from hyperpyyaml import load_hyperpyyaml

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        with open(src.yaml) as f:
            tree = load_hyperpyyaml(f, dict(src.overrides) or None)
    value: Any = tree
    for part in src.module.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, torch.nn.Module) and part in dict(value.named_children()):
            value = getattr(value, part)
        else:
            raise ConfigError(f"{src.yaml}: module {src.module!r}: no entry {part!r}; top-level keys: "
                              f"{', '.join(map(str, tree))}")
    if isinstance(value, Mapping) and value and all(isinstance(v, torch.nn.Module) for v in value.values()):
        value = torch.nn.ModuleDict(dict(value))
    if not isinstance(value, torch.nn.Module):
        raise ConfigError(f"{src.yaml}: {src.module!r} is a {type(value).__name__}, not a torch.nn.Module")
    return value, int(tree.get("sample_rate", DEFAULT_SAMPLE_RATE))


def model_sample_rate(model: Any) -> Tuple[int, str]:
    """The sample rate a pretrained interface expects, and where it was read from."""
    normalizer = getattr(model, "audio_normalizer", None)
    if getattr(normalizer, "sample_rate", None):
        return int(normalizer.sample_rate), "audio_normalizer.sample_rate"
    hparams = getattr(model, "hparams", None)
    if getattr(hparams, "sample_rate", None):
        return int(hparams.sample_rate), "hparams.sample_rate"
    return DEFAULT_SAMPLE_RATE, "default (the model states none)"


class LoadedModel:
    """A model loaded on its device, ready to prepare timed calls.

    Arguments
    ---------
    src : ModelSource
    device : str
    seed : int
        Seeds a module's construction and the noise inputs.
    download_folder : str
        Where a hub model would be fetched.
    """

    def __init__(self, src: ModelSource, device: str, seed: int, download_folder: str):
        import torch

        from sbprof.models.interfaces import InterfaceSpec

        self.src = src
        self.device = torch.device(device)
        self.seed = seed
        if src.is_module:
            module, self.sample_rate = build_module(src, seed)
            self.model: Any = module.eval().to(self.device)
            self.rate_source = "the module's YAML (sample_rate)"
            self.interface: Optional[InterfaceSpec] = None
            self.modules = module
        else:
            self.model = load_interface(src, device, download_folder)
            self.sample_rate, self.rate_source = model_sample_rate(self.model)
            self.interface = InterfaceSpec(src.type, src.method, src.args)
            mods = getattr(self.model, "mods", None)
            self.modules = mods if isinstance(mods, torch.nn.Module) else None

    def prepare(self, audio_s: float, batch_size: int, example: Any = None, frames: Optional[int] = None,
                frame_shift_s: float = 0.01) -> Tuple[Callable[[], Any], float]:
        """The call for one batch, and the seconds of audio it processes (the RTF denominator).

        Inputs are built before the call is returned: the timed closure does the
        model's work only. A features input has ``frames`` frames (default
        ``audio_s / frame_shift_s``, rounded).
        """
        import torch

        from sbprof.models.audio import make_batch
        from sbprof.models.interfaces import make_call

        if self.src.is_module and self.src.input == "features":
            n_frames = frames if frames is not None else max(1, round(audio_s / frame_shift_s))
            generator = torch.Generator().manual_seed(self.seed)
            x = torch.randn(batch_size, n_frames, self.src.features, generator=generator).to(self.device)
            return _no_grad(self.model, x), batch_size * n_frames * frame_shift_s
        batch = make_batch(audio_s, batch_size, self.sample_rate, seed=self.seed, example=example)
        if self.interface is not None:
            return make_call(self.model, self.interface, batch.wavs, batch.wav_lens), batch.seconds
        return _no_grad(self.model, batch.wavs.to(self.device)), batch.seconds


def _no_grad(module: Any, x: Any) -> Callable[[], Any]:
    import torch

    def call() -> Any:
        with torch.no_grad():
            return module(x)

    return call
