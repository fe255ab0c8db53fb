"""How the profiler calls each SpeechBrain pretrained interface on a batch.

A call is described as data, an :class:`InterfaceSpec`: the interface class
name, the batch method to call and what to pass to it positionally, each
argument named from a fixed vocabulary (:data:`ARG_NAMES`). The built-in
specs cover the interfaces SpeechBrain's profiling recipe listed; a user adds
another interface in a few lines of YAML::

    interface:
        type: mypkg.interfaces.MyInterface   # or a speechbrain.inference name
        method: process_batch
        args: [wavs, wav_lens]

Authors
 * sbprof contributors
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from sbprof.base.checks import nearest
from sbprof.base.errors import ConfigError

#: What an argument name in ``InterfaceSpec.args`` stands for. Every input is
#: derived from the one batch being profiled, so all share its shape and cost.
ARG_NAMES: Dict[str, str] = {
    "wavs": "the batch of waveforms, float [batch, samples]",
    "wav_lens": "relative lengths of the batch, [batch] (1.0 = no padding)",
    "wavs_pair": (
        "a second batch of the same shape: the batch rotated in time by half "
        "its length, so its content differs but its statistics do not"
    ),
    "wav_lens_pair": "relative lengths of wavs_pair, [batch]",
    "sources_pair": (
        "wavs and wavs_pair stacked as two estimated sources, "
        "[batch, samples, 2], the layout separators return"
    ),
}


@dataclass(frozen=True)
class InterfaceSpec:
    """How to call one pretrained interface on a batch.

    Arguments
    ---------
    type : str
        Interface class: a name in ``speechbrain.inference`` or a dotted path
        ``package.module.Class``.
    method : str
        Name of the batch method to call on an instance of the class.
    args : tuple of str
        What to pass positionally, each a key of ``ARG_NAMES``.

    Example
    -------
    >>> spec = InterfaceSpec("EncoderASR", "transcribe_batch", ("wavs", "wav_lens"))
    >>> spec.method
    'transcribe_batch'
    """

    type: str
    method: str
    args: Tuple[str, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or not self.type:
            raise ConfigError(f"Interface type must be a non-empty string, got {self.type!r}")
        if not isinstance(self.method, str) or not self.method.isidentifier():
            raise ConfigError(
                f"Interface {self.type!r}: method must be a Python identifier, "
                f"got {self.method!r}"
            )
        # A bare string would otherwise be taken apart letter by letter.
        if isinstance(self.args, str) or not isinstance(self.args, (tuple, list)):
            raise ConfigError(
                f"Interface {self.type!r}: args must be a list of names, "
                f"got {self.args!r}; allowed names: {', '.join(ARG_NAMES)}"
            )
        for arg in self.args:
            if arg not in ARG_NAMES:
                raise ConfigError(
                    f"Interface {self.type!r}: unknown argument name {arg!r}; "
                    f"allowed names: {', '.join(ARG_NAMES)}"
                )
        object.__setattr__(self, "args", tuple(self.args))


def _spec(type_name: str, method: str, *args: str) -> InterfaceSpec:
    """Shorthand for the built-in table below."""
    return InterfaceSpec(type_name, method, args)


#: The batch call of every interface SpeechBrain's profiling recipe listed
#: (plus WhisperASR), as of speechbrain 1.1.
BUILTIN_INTERFACES: Dict[str, InterfaceSpec] = {
    spec.type: spec
    for spec in (
        _spec("EncoderDecoderASR", "transcribe_batch", "wavs", "wav_lens"),
        _spec("EncoderASR", "transcribe_batch", "wavs", "wav_lens"),
        _spec("WhisperASR", "transcribe_batch", "wavs", "wav_lens"),
        _spec("EndToEndSLU", "decode_batch", "wavs", "wav_lens"),
        _spec("EncoderClassifier", "classify_batch", "wavs", "wav_lens"),
        _spec(
            "SpeakerRecognition",
            "verify_batch",
            "wavs",
            "wavs_pair",
            "wav_lens",
            "wav_lens_pair",
        ),
        _spec("VAD", "get_speech_prob_chunk", "wavs", "wav_lens"),
        _spec("SepformerSeparation", "separate_batch", "wavs"),
        _spec("SpectralMaskEnhancement", "enhance_batch", "wavs", "wav_lens"),
        # estimate_batch(mix, predictions) scores two separated sources
        # against their mixture. Without a separator in the loop, the batch
        # and its time-rotated copy stand in for the two sources: the SNR
        # values mean nothing, the cost is that of scoring one mixture.
        _spec("SNREstimator", "estimate_batch", "wavs", "sources_pair"),
    )
}


def resolve_interface(
    type_name: str,
    method: Optional[str] = None,
    args: Optional[List[str]] = None,
) -> InterfaceSpec:
    """Returns the spec of an interface: built-in, or defined by the user.

    Arguments
    ---------
    type_name : str
        Interface class name or dotted path.
    method : str, optional
        Batch method to call. Overrides the built-in one; required (with
        ``args``) for a type without a built-in spec.
    args : list of str, optional
        Names from ``ARG_NAMES`` to pass positionally. Overrides the built-in
        ones; required (with ``method``) for a type without a built-in spec.

    Returns
    -------
    InterfaceSpec

    Example
    -------
    >>> resolve_interface("EncoderClassifier").method
    'classify_batch'
    >>> resolve_interface("mypkg.MyInterface", "run", ["wavs"]).args
    ('wavs',)
    """
    builtin = BUILTIN_INTERFACES.get(type_name)
    if builtin is None and (method is None or args is None):
        raise ConfigError(
            f"No built-in call for interface type {type_name!r}: give both "
            f"`method` and `args` (names from: {', '.join(ARG_NAMES)}). "
            f"Built-in types: {', '.join(sorted(BUILTIN_INTERFACES))}"
        )
    if builtin is not None:
        method = builtin.method if method is None else method
        args = list(builtin.args) if args is None else args
    return InterfaceSpec(type_name, method, args)


def _find_in_speechbrain_inference(name: str) -> Optional[type]:
    """Looks a class name up in ``speechbrain.inference`` and its modules.

    Some interfaces (e.g. SNREstimator in ``speechbrain.inference.metrics``)
    are not re-exported by the package, so its modules are searched too.
    """
    package = importlib.import_module("speechbrain.inference")
    found = getattr(package, name, None)
    if isinstance(found, type):
        return found
    for module_info in pkgutil.iter_modules(package.__path__):
        try:
            module = importlib.import_module(f"{package.__name__}.{module_info.name}")
        except ImportError:  # a module whose optional dependency is missing
            continue
        found = getattr(module, name, None)
        if isinstance(found, type):
            return found
    return None


def _speechbrain_inference_classes() -> List[str]:
    """Names of the interface classes speechbrain.inference offers (for "did you mean")."""
    package = importlib.import_module("speechbrain.inference")
    return sorted({name for name in dir(package) if isinstance(getattr(package, name), type)}
                  | set(BUILTIN_INTERFACES))


def interface_class(type_name: str) -> type:
    """Returns the class an interface type names.

    Arguments
    ---------
    type_name : str
        A class name from ``speechbrain.inference`` (e.g. ``"EncoderASR"``)
        or a dotted path to any class (e.g. ``"mypkg.interfaces.MyASR"``).

    Returns
    -------
    type

    Example
    -------
    >>> interface_class("EncoderASR").__name__
    'EncoderASR'
    """
    if "." not in type_name:
        found = _find_in_speechbrain_inference(type_name)
        if found is None:
            raise ConfigError(
                f"no class {type_name!r} in speechbrain.inference"
                f"{nearest(type_name, _speechbrain_inference_classes())}; use a dotted path "
                f"pkg.module.Class for other classes. Built-in types: {', '.join(sorted(BUILTIN_INTERFACES))}"
            )
        return found
    module_name, _, class_name = type_name.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(
            f"Interface type {type_name!r}: cannot import module "
            f"{module_name!r} ({error})"
        ) from error
    found = getattr(module, class_name, None)
    if not isinstance(found, type):
        raise ConfigError(
            f"Interface type {type_name!r}: module {module_name!r} has no "
            f"class {class_name!r}"
        )
    return found


def _model_device(model: Any) -> torch.device:
    """The device a model runs on: its ``device`` attribute (as SpeechBrain
    interfaces have), else that of its first parameter, else the CPU."""
    device = getattr(model, "device", None)
    if device is not None:
        return torch.device(device)
    if isinstance(model, torch.nn.Module):
        for parameter in model.parameters():
            return parameter.device
    return torch.device("cpu")


def make_call(
    model: Any, spec: InterfaceSpec, wavs: torch.Tensor, wav_lens: torch.Tensor
) -> Callable[[], Any]:
    """Prepares one batch call of an interface, to be timed by the caller.

    All inputs are built and moved to the model's device here, so the
    returned closure does nothing but the call itself (under
    ``torch.no_grad()``). It does not synchronise CUDA: that is the timer's
    job.

    Arguments
    ---------
    model : object
        An instance of the interface class, e.g. from ``from_hparams``.
    spec : InterfaceSpec
        How to call it.
    wavs : torch.Tensor
        Waveforms, float [batch, samples].
    wav_lens : torch.Tensor
        Relative lengths, [batch].

    Returns
    -------
    callable
        A zero-argument function returning whatever the method returns.

    Example
    -------
    >>> class Doubler:
    ...     def double_batch(self, wavs):
    ...         return wavs * 2
    >>> spec = InterfaceSpec("Doubler", "double_batch", ("wavs",))
    >>> call = make_call(Doubler(), spec, torch.ones(2, 3), torch.ones(2))
    >>> call().shape
    torch.Size([2, 3])
    """
    method = getattr(model, spec.method, None)
    if not callable(method):
        raise ConfigError(
            f"Interface {spec.type!r}: {type(model).__name__} has no method "
            f"{spec.method!r}"
        )
    if wavs.dim() != 2:
        raise ConfigError(
            f"wavs must be [batch, samples], got shape {tuple(wavs.shape)}"
        )
    if wav_lens.shape != wavs.shape[:1]:
        raise ConfigError(
            f"wav_lens must be [batch] = [{wavs.shape[0]}], got shape "
            f"{tuple(wav_lens.shape)}"
        )

    device = _model_device(model)
    wavs = wavs.to(device)
    wav_lens = wav_lens.to(device)
    inputs: Dict[str, Callable[[], torch.Tensor]] = {
        "wavs": lambda: wavs,
        "wav_lens": lambda: wav_lens,
        "wavs_pair": lambda: torch.roll(wavs, wavs.shape[1] // 2, dims=1),
        "wav_lens_pair": lambda: wav_lens.clone(),
        "sources_pair": lambda: torch.stack(
            [wavs, torch.roll(wavs, wavs.shape[1] // 2, dims=1)], dim=-1
        ),
    }
    # Only what the spec names is built, and built now, outside the closure.
    args = tuple(inputs[name]() for name in spec.args)

    def call() -> Any:
        with torch.no_grad():
            return method(*args)

    return call
