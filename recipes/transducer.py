#!/usr/bin/env python3
"""Transducer-loss benchmark: ``python recipes/transducer.py CONFIG.yaml [--key value ...]``.

The same as ``sbprof transducer CONFIG.yaml``: everything happens in
:func:`sbprof.cli.job.main`; see ``transducer.yaml`` for the keys.
"""
import sys

from sbprof.cli.job import run_recipe

if __name__ == "__main__":
    sys.exit(run_recipe(__file__, "transducer", prog="python recipes/transducer.py"))
