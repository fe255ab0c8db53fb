"""HyperPyYAML configuration files, read the same way by every job (sweep, training, comparison, transducer).

- :func:`load_yaml`: the file (with command-line overrides merged in),
  one clear line for any failure;
- :func:`check_keys`: every key against a job's schema, with "did you mean";
- :func:`resolve_path`: relative paths are relative to the YAML's folder;
- ``example_audio: example`` names the recording shipped inside sbprof.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from sbprof.base.checks import nearest
from sbprof.base.errors import ConfigError
from sbprof.base.inputfiles import read_input_file

EXAMPLE_TOKEN = "example"
"""``example_audio: example`` names the recording shipped inside sbprof, wherever the YAML lives."""


def shipped_example() -> Path:
    """The example recording that ships inside the package (5.8 s of synthesised speech)."""
    return Path(__file__).resolve().parents[1] / "data" / "example_audio.wav"


MAX_CONFIG_BYTES = 1 << 20
"""Configuration files larger than this (1 MiB) are refused before parsing: YAML parsing of a few MB takes
minutes, and no configuration needs more than a few KB."""


def read_config_text(path: Union[str, Path]) -> str:
    """The text of a configuration file, or one clear line: missing, a symbolic link loop, not a regular file,
    too large, not UTF-8, empty.

    Example
    -------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "c.yaml"
    >>> _ = p.write_bytes(b"seed: 1 # caf\\xe9\\n")
    >>> read_config_text(p)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: ...c.yaml: not UTF-8 text (byte 0xe9 at position 13); save it as UTF-8
    """
    if not isinstance(path, (str, os.PathLike)):  # e.g. the configuration's keys given to sbprof.run as a dict
        raise ConfigError(f"a configuration is a YAML file: give its path, not a {type(path).__name__} "
                          f"({str(path)[:60]}); keys to change go in overrides=")
    file = str(path)
    raw = read_input_file(path, MAX_CONFIG_BYTES, "configuration file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at position {exc.start}); "
                          "save it as UTF-8") from None
    if all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines()):
        raise ConfigError(f"{file}: the file is empty (no keys, at most comments)")
    return text


MAX_DEPTH = 50
"""Deepest nesting of lists and mappings accepted (a configuration needs a handful; thousands crash the loader)."""
MAX_NODES = 100_000
"""Most values a configuration may hold once its aliases are expanded ("billion laughs" files hold billions)."""


def check_structure(text: str, where: str) -> None:
    """Refuse YAML nested deeper than :data:`MAX_DEPTH` or expanding past :data:`MAX_NODES` values, before
    anything is built (the event stream is read without recursion and without expanding aliases).

    Example
    -------
    >>> check_structure("a: &x [1, 2]\\nb: [*x, *x]", "c.yaml")
    >>> check_structure("a: " + "[" * 60 + "]" * 60, "c.yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: c.yaml: nested more than 50 levels deep (line 1); ...
    """
    import ruamel.yaml
    from ruamel.yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, ScalarEvent

    sizes: Dict[str, int] = {}  # values under each anchor, aliases expanded
    open_nodes: List[List[Any]] = [[None, 0]]  # [anchor, values so far] of each open list or mapping
    for event in ruamel.yaml.YAML(typ="rt").parse(text):
        if isinstance(event, CollectionStartEvent):
            open_nodes.append([event.anchor, 1])
            if len(open_nodes) > MAX_DEPTH + 1:
                raise ConfigError(f"{where}: nested more than {MAX_DEPTH} levels deep (line "
                                  f"{event.start_mark.line + 1}); a configuration needs a few")
            continue
        if isinstance(event, CollectionEndEvent):
            anchor, nodes = open_nodes.pop()
        elif isinstance(event, ScalarEvent):
            anchor, nodes = event.anchor, 1
        elif isinstance(event, AliasEvent):
            anchor, nodes = None, sizes.get(event.anchor, 1)
        else:
            continue
        if anchor is not None:
            sizes[anchor] = nodes
        open_nodes[-1][1] += nodes
        if open_nodes[-1][1] > MAX_NODES:
            raise ConfigError(f"{where}: its aliases (*name) expand to more than {MAX_NODES:,} values (line "
                              f"{event.start_mark.line + 1}); a configuration holds a few hundred")


Replacement = Tuple[Tuple[str, ...], Any]


def split_overrides(document: Mapping[str, Any], overrides: Mapping[str, Any]) -> Tuple[Dict[str, Any],
                                                                                      List[Replacement]]:
    """Overrides HyperPyYAML can merge, and the mappings given for keys the file holds as something else.

    HyperPyYAML merges a mapping into a mapping and fails on a mapping given
    for ``null`` (or a list); those are set whole after loading instead, at
    their key path.

    Example
    -------
    >>> split_overrides({"capacity": None, "dims": {"a": 1}}, {"capacity": {"chunk_size": 16}, "dims": {"a": 2}})
    ({'dims': {'a': 2}}, [(('capacity',), {'chunk_size': 16})])
    """
    merged: Dict[str, Any] = {}
    replaced: List[Replacement] = []
    for key, value in overrides.items():
        here = document.get(key)
        if isinstance(value, Mapping) and key in document and not isinstance(here, Mapping):
            replaced.append(((key,), value))
        elif isinstance(value, Mapping) and isinstance(here, Mapping):
            inner, deeper = split_overrides(here, value)
            merged[key] = inner
            replaced += [((key, *path), v) for path, v in deeper]
        else:
            merged[key] = value
    return merged, replaced


def _replace(tree: Any, path: Tuple[str, ...], value: Any, file: str) -> None:
    node = tree
    for key in path[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        raise ConfigError(f"command line: --{path[0]}: {'.'.join(path)} is not a plain mapping key in {file}, so a "
                          "mapping cannot be given for it")
    node[path[-1]] = value


def load_yaml(path: Union[str, Path], overrides: Optional[Mapping[str, Any]] = None) -> Any:
    """A HyperPyYAML file loaded with ``overrides`` merged in (a mapping given for a key the file holds as
    ``null`` or a list replaces it: :func:`split_overrides`); one clear line for any failure."""
    import io

    import ruamel.yaml
    from hyperpyyaml import load_hyperpyyaml

    file = str(path)
    text = read_config_text(path)
    try:
        check_structure(text, file)
        # A structural first read (tags kept, nothing built): HyperPyYAML fails obscurely on a non-mapping.
        top = ruamel.yaml.YAML(typ="rt").load(text)
    except ruamel.yaml.YAMLError as exc:
        raise ConfigError(f"{file}: not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(top, Mapping):
        raise ConfigError(f"{file}: the top level must be a mapping of keys, got {'a list' if isinstance(top, list) else type(top).__name__}")
    merged, replaced = split_overrides(top, overrides or {})
    stream = io.StringIO(text)
    stream.name = str(Path(path).resolve())  # HyperPyYAML resolves !include paths against the file's folder
    try:
        tree = load_hyperpyyaml(stream, merged or None, overrides_must_match=False)
    except ruamel.yaml.YAMLError as exc:
        raise ConfigError(f"{file}: not valid YAML: {' '.join(str(exc).split())}") from None
    except (KeyError, ValueError, TypeError, ImportError, AttributeError) as exc:
        # HyperPyYAML raises these for bad !ref / !new / !name entries, and for a file
        # that is not a mapping at the top level.
        raise ConfigError(f"{file}: cannot be loaded by HyperPyYAML: {type(exc).__name__}: {exc}") from None
    except OSError as exc:
        # An !include of a file that is missing or unreadable: name that file, not this one.
        name = exc.filename or "a file it includes"
        raise ConfigError(f"{file}: {name}: cannot be read ({exc.strerror or exc}), named by an !include") from None
    for key_path, value in replaced:
        _replace(tree, key_path, value, file)
    return tree


def top_level_keys(path: Union[str, Path]) -> List[str]:
    """The top-level keys of a HyperPyYAML file, read without building anything (no tag runs).

    Example
    -------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.yaml"
    >>> _ = p.write_text("model: !new:torch.nn.Linear [2, 3]\\nlr: 0.1\\nrun: !apply:os.system ['false']\\n")
    >>> top_level_keys(p)
    ['model', 'lr', 'run']
    """
    import ruamel.yaml

    text = read_config_text(path)
    try:
        check_structure(text, str(path))
        tree = ruamel.yaml.YAML(typ="rt").load(text)
    except ruamel.yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(tree, Mapping):
        raise ConfigError(f"{path}: the top level must be a mapping of keys")
    return [str(k) for k in tree]


def check_keys(tree: Any, schema: Dict[str, Any], file: str, prefix: str = "") -> None:
    """Refuse any key not in ``schema`` (recursively), suggesting the closest known one."""
    if not isinstance(tree, Mapping):
        where = f"{file}: {prefix}" if prefix else f"{file}: the top level"
        raise ConfigError(f"{where} must be a mapping of keys, got {type(tree).__name__} {tree!r}")
    for key, value in tree.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if key not in schema:
            hint = nearest(str(key), list(schema))
            if hint and prefix:
                hint = hint.replace("'", f"'{prefix}.", 1)
            raise ConfigError(f"{file}: unknown key {name!r}{hint}; known keys here: {', '.join(schema)}")
        if isinstance(schema[key], dict) and value is not None:
            check_keys(value, schema[key], file, name)


def resolve_path(value: str, base: Path) -> Path:
    """``value`` with ``~`` expanded, taken relative to ``base`` (the YAML's folder) unless absolute."""
    path = Path(os.path.expanduser(value))
    return path if path.is_absolute() else base / path
