"""Results files: atomic writes, one run per folder, resume rules, version migration.

- :mod:`sbprof.results.files`: output folder checks, a disk reserve (atomic writes: :mod:`sbprof.base.atomic`);
- :mod:`sbprof.results.lock`: one run per output folder;
- :mod:`sbprof.results.store`: ``results.json`` (:class:`Results`, :class:`ResultStore`, :func:`load_results`).
"""
from sbprof.base.atomic import atomic_write
from sbprof.results.files import prepare_output_folder
from sbprof.results.lock import FolderInUse, FolderLock
from sbprof.results.store import RESULTS_FILE, Results, ResultStore, StorageError, load_results

__all__ = ["FolderInUse", "FolderLock", "RESULTS_FILE", "ResultStore", "Results", "StorageError",
           "atomic_write", "load_results", "prepare_output_folder"]
