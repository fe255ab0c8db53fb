"""Tests of sbprof.models.interfaces: interface specs as data and the batch call."""

from __future__ import annotations

import inspect
from typing import Any, List

import pytest
import torch
import yaml

from sbprof.models.interfaces import (
    ARG_NAMES,
    BUILTIN_INTERFACES,
    InterfaceSpec,
    interface_class,
    make_call,
    resolve_interface,
)

# The interfaces SpeechBrain's profiling recipe listed, plus WhisperASR.
RECIPE_INTERFACES = {
    "EncoderDecoderASR",
    "EncoderASR",
    "EndToEndSLU",
    "EncoderClassifier",
    "SpeakerRecognition",
    "VAD",
    "SepformerSeparation",
    "SpectralMaskEnhancement",
    "SNREstimator",
    "WhisperASR",
}


class Recorder(torch.nn.Module):
    """A stand-in interface that records how it was called."""

    def __init__(self, device: str = "cpu") -> None:
        super().__init__()
        self.device = device
        self.calls: List[Any] = []

    def process_batch(self, *args: torch.Tensor) -> str:
        self.calls.append((args, torch.is_grad_enabled()))
        return "done"


def test_builtins_cover_the_recipe() -> None:
    assert set(BUILTIN_INTERFACES) == RECIPE_INTERFACES
    for type_name, spec in BUILTIN_INTERFACES.items():
        assert spec.type == type_name


@pytest.mark.parametrize("type_name", sorted(BUILTIN_INTERFACES))
def test_builtin_method_exists_and_takes_the_args(type_name: str) -> None:
    spec = BUILTIN_INTERFACES[type_name]
    cls = interface_class(type_name)
    assert hasattr(cls, spec.method)
    # Binding fails if the method cannot take this many positional args.
    inspect.signature(getattr(cls, spec.method)).bind(None, *spec.args)


def test_resolve_builtin() -> None:
    assert resolve_interface("EncoderASR") == BUILTIN_INTERFACES["EncoderASR"]


def test_resolve_user_defined_from_yaml() -> None:
    recorder_path = f"{__name__}.Recorder"
    config = yaml.safe_load(
        f"type: {recorder_path}\n"
        "method: process_batch\n"
        "args: [wavs, wav_lens]\n"
    )
    spec = resolve_interface(config["type"], config["method"], config["args"])
    assert spec == InterfaceSpec(recorder_path, "process_batch", ("wavs", "wav_lens"))
    model = interface_class(spec.type)()
    assert make_call(model, spec, torch.zeros(2, 8), torch.ones(2))() == "done"


def test_resolve_overrides_one_field_of_a_builtin() -> None:
    spec = resolve_interface("EncoderASR", method="encode_batch")
    assert spec.method == "encode_batch"
    assert spec.args == BUILTIN_INTERFACES["EncoderASR"].args


@pytest.mark.parametrize(
    "kwargs", [{}, {"method": "run"}, {"args": ["wavs"]}], ids=["none", "method", "args"]
)
def test_resolve_unknown_type_needs_method_and_args(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="MyInterface") as error:
        resolve_interface("MyInterface", **kwargs)
    assert "EncoderASR" in str(error.value)  # lists the built-in types
    assert "wav_lens" in str(error.value)  # and the argument names


def test_resolve_rejects_unknown_arg_name() -> None:
    with pytest.raises(ValueError, match="'wav_length'") as error:
        resolve_interface("MyInterface", "run", ["wavs", "wav_length"])
    for name in ARG_NAMES:
        assert name in str(error.value)


def test_resolve_rejects_args_as_one_string() -> None:
    with pytest.raises(ValueError, match="list of names"):
        resolve_interface("MyInterface", "run", "wavs")  # type: ignore[arg-type]


def test_resolve_rejects_bad_method_name() -> None:
    with pytest.raises(ValueError, match="'run batch'"):
        resolve_interface("MyInterface", "run batch", ["wavs"])


def test_interface_class_by_name_and_path() -> None:
    from speechbrain.inference.ASR import EncoderASR
    from speechbrain.inference.metrics import SNREstimator

    assert interface_class("EncoderASR") is EncoderASR
    # Not re-exported by speechbrain.inference, found in its modules.
    assert interface_class("SNREstimator") is SNREstimator
    assert interface_class("speechbrain.inference.ASR.EncoderASR") is EncoderASR


@pytest.mark.parametrize(
    "type_name, named",
    [
        ("NoSuchInterface", "NoSuchInterface"),
        ("no_such_package.Interface", "no_such_package"),
        ("speechbrain.inference.ASR.NoSuchASR", "NoSuchASR"),
        ("os.path.join", "join"),  # a function, not a class
    ],
)
def test_interface_class_errors(type_name: str, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        interface_class(type_name)


def test_make_call_passes_named_inputs() -> None:
    model = Recorder()
    spec = InterfaceSpec("Recorder", "process_batch", tuple(ARG_NAMES))
    wavs = torch.arange(12, dtype=torch.float32).reshape(2, 6)
    wav_lens = torch.ones(2)
    call = make_call(model, spec, wavs, wav_lens)
    assert model.calls == []  # nothing runs before the caller times it
    assert call() == "done"
    (args, grad_enabled), = model.calls
    got = dict(zip(spec.args, args))
    assert not grad_enabled
    assert torch.equal(got["wavs"], wavs)
    assert torch.equal(got["wav_lens"], wav_lens)
    assert torch.equal(got["wavs_pair"], torch.roll(wavs, 3, dims=1))
    assert torch.equal(got["wav_lens_pair"], wav_lens)
    assert got["sources_pair"].shape == (2, 6, 2)
    assert torch.equal(got["sources_pair"][..., 0], wavs)
    assert torch.equal(got["sources_pair"][..., 1], got["wavs_pair"])


def test_make_call_prepares_inputs_once_on_the_model_device() -> None:
    model = Recorder(device="meta")
    spec = InterfaceSpec("Recorder", "process_batch", ("wavs", "wav_lens"))
    call = make_call(model, spec, torch.zeros(2, 8), torch.ones(2))
    call()
    call()
    (first, _), (second, _) = model.calls
    assert all(arg.device.type == "meta" for arg in first)
    assert all(a is b for a, b in zip(first, second))


def test_make_call_errors() -> None:
    model = Recorder()
    spec = InterfaceSpec("Recorder", "transcribe_batch", ("wavs",))
    with pytest.raises(ValueError, match="transcribe_batch"):
        make_call(model, spec, torch.zeros(2, 8), torch.ones(2))
    spec = InterfaceSpec("Recorder", "process_batch", ("wavs",))
    with pytest.raises(ValueError, match="wavs"):
        make_call(model, spec, torch.zeros(8), torch.ones(1))
    with pytest.raises(ValueError, match="wav_lens"):
        make_call(model, spec, torch.zeros(2, 8), torch.ones(3))
