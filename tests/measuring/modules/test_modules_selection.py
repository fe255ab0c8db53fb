"""Which modules get rows: globs, types, the Conformer defaults, and errors for a selection that matches nothing."""
import pytest
import torch

from modules_models import speechbrain_conformer, torchaudio_conformer
from sbprof.base.errors import ConfigError
from sbprof.measuring.modules.selection import compile_glob, default_selection, select_modules


@pytest.mark.parametrize("pattern, name, matches", [
    ("encoder.layers.*.self_attn", "encoder.layers.12.self_attn", True),
    ("encoder.layers.*.self_attn", "encoder.layers.1.inner.self_attn", False),
    ("encoder.*", "encoder", False),
    ("**.norm", "encoder.layers.0.norm", True),
    ("layers.?", "layers.3", True),
    ("layers.?", "layers.10", False),
])
def test_glob_matches_whole_name_components(pattern, name, matches):
    assert bool(compile_glob(pattern).fullmatch(name)) is matches


def test_default_speechbrain_conformer_names_each_layer_and_its_blocks():
    model = speechbrain_conformer(layers=2)
    names = default_selection(model)
    for i in range(2):
        for part in ("", ".ffn_module1", ".mha_layer", ".convolution_module", ".ffn_module2", ".norm2"):
            assert f"layers.{i}{part}" in names
    assert "norm" in names and "layers" not in names  # a ModuleList never runs


def test_default_torchaudio_conformer_names_each_layer_and_its_blocks():
    names = default_selection(torchaudio_conformer(layers=2))
    assert names == [f"conformer_layers.{i}{p}" for i in range(2) for p in (
        "", ".ffn1", ".self_attn", ".conv_module", ".ffn2", ".final_layer_norm")]


def test_default_inside_a_brain_like_module_dict():
    from speechbrain.lobes.models.convolution import ConvolutionFrontEnd

    modules = torch.nn.ModuleDict({"CNN": ConvolutionFrontEnd((None, None, 20), num_blocks=1),
                                   "enc": speechbrain_conformer(1), "ctc_lin": torch.nn.Linear(32, 10)})
    names = default_selection(modules)
    assert names[:2] == ["CNN", "enc"] and "ctc_lin" in names and "enc.layers.0.mha_layer" in names


def test_type_selects_instances_and_their_children():
    model = speechbrain_conformer(layers=2)
    names = select_modules(model, "type:ConformerEncoderLayer")
    assert "layers.0" in names and "layers.1.mha_layer" in names and "layers.1.drop" in names
    assert "layers.1.mha_layer.att" not in names  # grandchildren are not
    from speechbrain.lobes.models.transformer.Conformer import ConformerEncoderLayer
    assert select_modules(model, ConformerEncoderLayer) == names


def test_selection_is_in_registration_order_without_duplicates():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU(), torch.nn.Linear(2, 2))
    assert select_modules(model, ["2", "0", "*"]) == ["0", "1", "2"]


@pytest.mark.parametrize("selection, message", [
    ("layers.*.self_atn", "pattern 'layers.*.self_atn' matches no module of ConformerEncoder"),
    ("type:Conformerlayer", "type 'Conformerlayer' matches no module"),
    (torch.nn.GRU, "type 'GRU' matches no module"),
    ([], "non-empty list"),
    (3, "must be 'default'"),
])
def test_a_selection_matching_nothing_is_a_config_error(selection, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("*", r"\*").replace(".", r"\.")):
        select_modules(speechbrain_conformer(1), selection)


def test_the_error_suggests_the_closest_name():
    with pytest.raises(ConfigError, match=r"did you mean 'norm'"):
        select_modules(speechbrain_conformer(1), "nrom")
