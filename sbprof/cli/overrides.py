"""SpeechBrain-style command lines: ``CONFIG.yaml [--key value ...] [--flag]``.

Every ``--key value`` overrides that key of the YAML file (the value is read
as YAML, so ``--batch_sizes "[1, 2]"`` or ``--profiling_dimensions "{...}"``
work); ``--key=value`` is the same. A few run options are flags or values of
their own (e.g. ``--noprogressbar``, ``--device cuda:0``). SpeechBrain's
training options (``--precision``, ``--debug``...) mean nothing to a
profiler and are refused by name rather than taken for YAML keys.
"""
from __future__ import annotations

from typing import Any, Dict, Sequence, Tuple

from sbprof.base.checks import nearest
from sbprof.base.errors import ConfigError
from sbprof.base.yamlconfig import check_structure

_TRUE = ("true", "yes", "1")
_FALSE = ("false", "no", "0")


def _speechbrain_options() -> Tuple[str, ...]:
    """SpeechBrain's run options (read from SpeechBrain itself, only when a name needs checking)."""
    try:
        import dataclasses

        from speechbrain.core import RunOptions
    except ImportError:
        return ()
    return tuple(f.name for f in dataclasses.fields(RunOptions))


def _yaml_value(key: str, text: str) -> Any:
    import ruamel.yaml

    try:
        check_structure(text, f"command line: --{key}")
        return ruamel.yaml.YAML(typ="safe", pure=True).load(text)
    except ruamel.yaml.YAMLError as exc:
        raise ConfigError(f"command line: --{key} {text!r} is not a valid YAML value "
                          f"({' '.join(str(exc).split())})") from None


def parse_command_line(argv: Sequence[str], keys: Sequence[str], flags: Sequence[str] = (),
                       values: Sequence[str] = ()) -> Tuple[str, Dict[str, Any], Dict[str, Any]]:
    """Split ``argv`` into the YAML path, key overrides and run options.

    Arguments
    ---------
    argv : list of str
        The arguments after the command name.
    keys : list of str
        The YAML file's top-level keys (what ``--key value`` may override).
    flags : list of str
        Boolean run options (``--flag``, or ``--flag true/false``).
    values : list of str
        Run options that take a value.

    Returns
    -------
    (path, overrides, run_options)

    Example
    -------
    >>> parse_command_line(["p.yaml", "--seed", "3", "--noprogressbar", "--device=cpu"],
    ...                    keys=["seed"], flags=["noprogressbar"], values=["device"])
    ('p.yaml', {'seed': 3}, {'noprogressbar': True, 'device': 'cpu'})
    """
    argv = list(argv)
    if not argv or argv[0].startswith("-"):
        raise ConfigError("give the YAML file first, e.g. profile.yaml --seed 3 (see --help)")
    path, rest = argv[0], argv[1:]
    overrides: Dict[str, Any] = {}
    options: Dict[str, Any] = {}
    i = 0
    while i < len(rest):
        token = rest[i]
        if not token.startswith("--") or len(token) == 2:
            raise ConfigError(f"command line: {token!r} is not an option: give --key value pairs after the YAML "
                              "file (a flag such as --noprogressbar stands alone, or takes true or false)")
        key, has_value, value = token[2:].partition("=")
        key = key.replace("-", "_")
        following = rest[i + 1] if i + 1 < len(rest) else None
        if key in flags:
            if not has_value and following is not None and not following.startswith("--"):
                value, has_value, i = following, True, i + 1
            if has_value and value.lower() not in _TRUE + _FALSE:
                raise ConfigError(f"command line: --{key} is a flag: give it alone, or true / false, not {value!r}")
            options[key] = not has_value or value.lower() in _TRUE
        elif key in values or key in keys:
            if not has_value:
                if following is None or following.startswith("--"):
                    raise ConfigError(f"command line: --{key} needs a value")
                value, i = following, i + 1
            if not value.strip():
                raise ConfigError(f"command line: --{key} needs a value, got an empty one ({value!r}); leave the "
                                  "option out to keep the YAML's")
            if key in values:
                options[key] = value
            else:
                overrides[key] = _yaml_value(key, value)
        elif key in _speechbrain_options():
            used = ", ".join(f"--{k}" for k in list(flags) + list(values))
            raise ConfigError(f"command line: --{key} is a SpeechBrain training option; sbprof does not use it "
                              f"(run options here: {used}; any YAML key can be overridden as --key value)")
        else:
            raise ConfigError(f"command line: unknown option --{key}{nearest(key, list(keys) + list(flags) + list(values))}; "
                              f"YAML keys: {', '.join(keys)}")
        i += 1
    from sbprof.jobs.preamble import CommandLineOverrides

    return path, CommandLineOverrides(overrides), options
