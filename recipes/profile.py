#!/usr/bin/env python3
"""SpeechBrain-style profiling recipe: ``python recipes/profile.py profile.yaml [--key value ...]``.

Everything happens in :func:`sbprof.cli.job.main`; see ``profile.yaml`` for the keys.
"""
import sys

from sbprof.cli.job import run_recipe

if __name__ == "__main__":
    sys.exit(run_recipe(__file__, "profile", prog="python recipes/profile.py"))
