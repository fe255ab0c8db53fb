#!/usr/bin/env python3
"""Comparison recipe: ``python recipes/compare.py compare.yaml [--key value ...]``.

Everything happens in :func:`sbprof.cli.job.main`; see ``compare.yaml`` for the keys.
"""
import sys

from sbprof.cli.job import run_recipe

if __name__ == "__main__":
    sys.exit(run_recipe(__file__, "compare-models", prog="sbprof compare-models"))
