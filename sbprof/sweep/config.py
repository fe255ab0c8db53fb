"""Loading the profiling recipe's HyperPyYAML file, with command-line overrides, into a checked config.

Overrides follow SpeechBrain: ``profile.yaml --seed 3 --output_folder out
--profiling_dimensions "{batch_sizes: [1, 2]}"`` (parsed by
:mod:`sbprof.cli.overrides`) are merged by HyperPyYAML, nested mappings key
by key. Validation is in :mod:`sbprof.sweep.validate`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional, Union

from sbprof.jobs.preamble import load_tree
from sbprof.sweep.schema import SCHEMA, SweepConfig
from sbprof.sweep.validate import validate


def load_config(path: Union[str, Path], overrides: Optional[Mapping[str, Any]] = None,
                run_options: Optional[Mapping[str, Any]] = None) -> SweepConfig:
    """A sweep's YAML file with the command line's overrides and run options, checked
    (:func:`sbprof.jobs.preamble.load_tree`, then :func:`sbprof.sweep.validate.validate`).

    Example
    -------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "p.yaml").write_text("pretrained_model: {source: encoder_asr, type: EncoderASR}\\n"
    ...     "profiling_dimensions: {audio_mockup_secs: [1], batch_sizes: [1], bach_sizes: [2]}\\n")
    >>> load_config(d / "p.yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: ...unknown key 'profiling_dimensions.bach_sizes' (did you mean 'profiling_dimensions.batch_sizes'?)...
    """
    return validate(load_tree(path, overrides, SCHEMA), str(path), Path(path).resolve().parent, run_options)
