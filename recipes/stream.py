#!/usr/bin/env python3
"""Streaming latency of a StreamingASR model: ``python recipes/stream.py stream.yaml [--key value ...]``.

The same as ``sbprof stream stream.yaml``: everything happens in
:func:`sbprof.cli.job.main`; see ``stream.yaml`` for the keys.
"""
import sys

from sbprof.cli.job import run_recipe

if __name__ == "__main__":
    sys.exit(run_recipe(__file__, "stream", prog="python recipes/stream.py"))
