"""Deprecated: sbprof's exceptions live in :mod:`sbprof.base.errors` (and ``sbprof.ConfigError``...).

Kept for one release so that ``from sbprof.errors import ConfigError`` goes on working, with a
:class:`DeprecationWarning` saying where to import from; it will be removed in the next release.

Example
-------
>>> import importlib, sys, warnings
>>> sys.modules.pop("sbprof.errors", None) and None
>>> with warnings.catch_warnings(record=True) as said:
...     warnings.simplefilter("always")
...     old = importlib.import_module("sbprof.errors")
>>> from sbprof.base import errors
>>> old.ConfigError is errors.ConfigError, said[0].category.__name__
(True, 'DeprecationWarning')
"""
import warnings

from sbprof.base.errors import BackendUnavailable, ConfigError, MeasurementError, SbprofError, failure_status

__all__ = ["BackendUnavailable", "ConfigError", "MeasurementError", "SbprofError", "failure_status"]

warnings.warn("sbprof.errors moved to sbprof.base.errors: import from there (or use sbprof.ConfigError...); "
              "sbprof.errors will be removed in the next release", DeprecationWarning, stacklevel=2)
