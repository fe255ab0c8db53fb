#!/usr/bin/env python3
"""SpeechBrain-style training-profile recipe: ``python recipes/train_profile.py train_profile.yaml [--key value ...]``.

Everything happens in :func:`sbprof.cli.job.main`; see ``train_profile.yaml`` for the keys.
"""
import sys

from sbprof.cli.job import run_recipe

if __name__ == "__main__":
    sys.exit(run_recipe(__file__, "train", prog="python recipes/train_profile.py"))
