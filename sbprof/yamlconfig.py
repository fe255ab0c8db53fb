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
from typing import Any, Dict, Mapping, Optional, Union

from sbprof.checks import nearest
from sbprof.errors import ConfigError

EXAMPLE_TOKEN = "example"
"""``example_audio: example`` names the recording shipped inside sbprof, wherever the YAML lives."""


def shipped_example() -> Path:
    """The example recording that ships inside the package (5.8 s of synthesised speech)."""
    return Path(__file__).resolve().parent / "data" / "example_audio.wav"


def load_yaml(path: Union[str, Path], overrides: Optional[Mapping[str, Any]] = None) -> Any:
    """A HyperPyYAML file loaded with ``overrides`` merged in; one clear line for any failure."""
    import ruamel.yaml
    from hyperpyyaml import load_hyperpyyaml

    file = str(path)
    if not Path(path).is_file():
        raise ConfigError(f"{file}: no such configuration file")
    try:
        # A structural first read (tags kept, nothing built): HyperPyYAML fails obscurely on a non-mapping.
        top = ruamel.yaml.YAML(typ="rt").load(Path(path).read_text())
    except ruamel.yaml.YAMLError as exc:
        raise ConfigError(f"{file}: not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(top, Mapping):
        raise ConfigError(f"{file}: the top level must be a mapping of keys, got {'a list' if isinstance(top, list) else type(top).__name__}")
    try:
        with open(path) as f:
            return load_hyperpyyaml(f, dict(overrides) if overrides else None, overrides_must_match=False)
    except ruamel.yaml.YAMLError as exc:
        raise ConfigError(f"{file}: not valid YAML: {' '.join(str(exc).split())}") from None
    except (KeyError, ValueError, TypeError, ImportError, AttributeError) as exc:
        # HyperPyYAML raises these for bad !ref / !new / !name entries, and for a file
        # that is not a mapping at the top level.
        raise ConfigError(f"{file}: cannot be loaded by HyperPyYAML: {type(exc).__name__}: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot be read: {exc.strerror}") from None


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
