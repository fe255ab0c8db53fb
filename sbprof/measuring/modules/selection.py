"""Which modules of a model get a row: name patterns, types, or a default for speech Conformers.

A selection is one item or a list of items, each one of:

- a glob on qualified module names (``encoder.layers.*.self_attn``): ``*``
  matches one name component (no dot), ``**`` any number of components,
  ``?`` one character; the pattern must match the whole name;
- a module class (``ConformerEncoderLayer``) or the string ``type:Name``
  (matched against the class and its base classes by name): every instance,
  and the modules registered directly under it;
- ``"default"``: :func:`default_selection`.

Names are relative to the root, which is never a row itself (its time is
the step's). Every item must match at least one module: a typo never yields
an empty, silently wrong table.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Tuple

import torch

from sbprof.base.checks import nearest
from sbprof.base.errors import ConfigError

DEFAULT = "default"
TYPE_PREFIX = "type:"

#: Class name -> the parts of an instance that the default selection names (relative patterns;
#: ``""`` is the instance itself). SpeechBrain's and torchaudio's Conformers, the SpeechBrain
#: Transformer that wraps one, the CNN front end, and torchaudio's RNN-T.
DEFAULT_PARTS: Dict[str, Tuple[str, ...]] = {
    # speechbrain.lobes.models.transformer.Conformer.ConformerEncoder
    "ConformerEncoder": ("", "layers.*", "layers.*.ffn_module1", "layers.*.mha_layer",
                         "layers.*.convolution_module", "layers.*.ffn_module2", "layers.*.norm2", "norm"),
    # torchaudio.models.Conformer
    "Conformer": ("conformer_layers.*", "conformer_layers.*.ffn1", "conformer_layers.*.self_attn",
                  "conformer_layers.*.conv_module", "conformer_layers.*.ffn2", "conformer_layers.*.final_layer_norm"),
    # speechbrain.lobes.models.transformer.TransformerASR.TransformerASR
    "TransformerASR": ("custom_src_module", "encoder", "decoder"),
    "ConvolutionFrontEnd": ("",),
    # torchaudio.models.RNNT
    "RNNT": ("transcriber", "predictor", "joiner"),
}

_GLOB_TOKEN = re.compile(r"\*\*|\*|\?|[^*?]+")


def compile_glob(pattern: str) -> "re.Pattern[str]":
    """A regular expression for a module-name glob.

    Example
    -------
    >>> g = compile_glob("encoder.layers.*.self_attn")
    >>> bool(g.fullmatch("encoder.layers.3.self_attn")), bool(g.fullmatch("encoder.layers.3.x.self_attn"))
    (True, False)
    >>> bool(compile_glob("**.norm").fullmatch("a.b.norm"))
    True
    """
    parts = []
    for token in _GLOB_TOKEN.findall(pattern):
        if token == "**":
            parts.append(r".*")
        elif token == "*":
            parts.append(r"[^.]*")
        elif token == "?":
            parts.append(r"[^.]")
        else:
            parts.append(re.escape(token))
    return re.compile("".join(parts))


def _is_type(module: torch.nn.Module, wanted: Any) -> bool:
    if isinstance(wanted, type):
        return isinstance(module, wanted)
    return any(cls.__name__ == wanted for cls in type(module).__mro__)


def _with_children(names: List[str], named: Dict[str, torch.nn.Module], matches: Iterable[str]) -> List[str]:
    found = set(matches)
    for name in list(found):
        prefix = f"{name}." if name else ""
        found.update(n for n in names if n.startswith(prefix) and n != name and "." not in n[len(prefix):])
    return [n for n in names if n in found]


def _relative(base: str, pattern: str) -> str:
    if not pattern:
        return base
    return f"{base}.{pattern}" if base else pattern


def default_selection(root: torch.nn.Module) -> List[str]:
    """The modules a speech researcher reads first: top-level parts and the blocks of known models.

    The children of ``root`` (in a ``Brain``: its modules, e.g. front end,
    encoder, heads, loss modules), and inside any module of a class listed in
    :data:`DEFAULT_PARTS` its parts: for a Conformer each layer and, inside
    it, the feed-forward modules, self-attention, convolution and the layer's
    final norm, then the encoder's final norm. Names are in registration order.

    Example
    -------
    >>> import torchaudio
    >>> model = torchaudio.models.Conformer(80, 4, 64, 1, 31)
    >>> default_selection(model)[:3]
    ['conformer_layers.0', 'conformer_layers.0.ffn1', 'conformer_layers.0.self_attn']
    """
    named = dict(root.named_modules())
    names = list(named)
    wanted = {n for n in names if n and "." not in n}
    for name, module in named.items():
        for cls in type(module).__mro__:
            parts = DEFAULT_PARTS.get(cls.__name__)
            if parts is None:
                continue
            for part in parts:
                regex = compile_glob(_relative(name, part))
                wanted.update(n for n in names if regex.fullmatch(n))
            break
    wanted.discard("")
    # Containers without a forward of their own (ModuleList, ModuleDict) never run: no row to show.
    return [n for n in names if n in wanted and type(named[n]).forward is not torch.nn.Module.forward]


def _as_items(selection: Any) -> List[Any]:
    if selection is None:
        return [DEFAULT]
    if isinstance(selection, (str, type)):
        return [selection]
    if isinstance(selection, (list, tuple)) and selection:
        return list(selection)
    raise ConfigError(f"modules must be 'default', a name pattern, a module class, 'type:ClassName' or a "
                      f"non-empty list of them, got {selection!r}")


def select_modules(root: torch.nn.Module, selection: Any = DEFAULT) -> List[str]:
    """The qualified names of the modules of ``root`` that ``selection`` names, in registration order.

    Arguments
    ---------
    root : torch.nn.Module
        The model (names are relative to it).
    selection : str, type, or list of them
        See the module docstring.

    Returns
    -------
    list of str

    Raises
    ------
    ConfigError
        For an item that matches no module, naming it and the closest names.

    Example
    -------
    >>> model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Sequential(torch.nn.ReLU()))
    >>> select_modules(model, ["0", "type:Sequential"])
    ['0', '1', '1.0']
    >>> select_modules(model, "2.*")
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: modules: pattern '2.*' matches no module of Sequential (names: 0, 1, 1.0)
    """
    if not isinstance(root, torch.nn.Module):
        raise ConfigError(f"module attribution needs a torch.nn.Module, got {type(root).__name__}")
    named = dict(root.named_modules())
    names = list(named)
    chosen: set = set()
    for item in _as_items(selection):
        if item == DEFAULT:
            found = default_selection(root)
            what = "the default selection"
        elif isinstance(item, type) or (isinstance(item, str) and item.startswith(TYPE_PREFIX)):
            wanted = item if isinstance(item, type) else item[len(TYPE_PREFIX):]
            found = _with_children(names, named, [n for n, m in named.items() if _is_type(m, wanted)])
            found = [n for n in found if n]
            what = f"type {getattr(wanted, '__name__', wanted)!r}"
        elif isinstance(item, str):
            regex = compile_glob(item)
            found = [n for n in names if n and regex.fullmatch(n)]
            what = f"pattern {item!r}"
        else:
            raise ConfigError(f"modules: {item!r} is neither a name pattern, a module class nor 'type:ClassName'")
        if not found:
            shown = ", ".join(n for n in names[1:21] if n) + (", ..." if len(names) > 21 else "")
            hint = nearest(item, names[1:]) if isinstance(item, str) else ""
            raise ConfigError(f"modules: {what} matches no module of {type(root).__name__}{hint} (names: {shown})")
        chosen.update(found)
    return [n for n in names if n in chosen]
