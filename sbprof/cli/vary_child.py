"""One variant of ``sbprof run --vary``, in its own process: its knobs set, then ``sbprof run`` as usual.

``python -m sbprof.cli.vary_child KNOBS_JSON LOSSES_JSON SBPROF_RUN_ARGS...``: the knobs
(:mod:`sbprof.script.knobs`) are set, every process seeded alike and each step's loop CPU recorded with its
DataLoader workers' (:mod:`sbprof.script.loop_cpu`) before ``sbprof run`` starts the script;
once it returns, the losses its steps computed go to ``LOSSES_JSON``. The exit code is ``sbprof run``'s.
"""
from __future__ import annotations

import contextlib
import json
import sys
from typing import List


def main(argv: List[str]) -> int:
    """Run one variant (see the module docstring); return ``sbprof run``'s exit code."""
    from sbprof.cli.run import main as run
    from sbprof.script import steps
    from sbprof.script.knobs import Losses, apply, seed_all

    steps.LOOP_CPU = True  # each step's loop CPU, the DataLoader workers' included: the comparison's CPU cost

    knobs, losses_path, rest = json.loads(argv[0]), argv[1], argv[2:]
    losses = Losses().install()
    try:
        with contextlib.ExitStack() as stack:
            apply(knobs, stack)
            seed_all()
            return run(rest, prog="sbprof run")
    finally:
        losses.remove()
        with open(losses_path, "w") as f:
            json.dump(losses.values, f)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
