"""``python -m sbprof ...`` (e.g. under ``torchrun -m sbprof train ...``): the ``sbprof`` command."""
import sys

from sbprof.cli import main

if __name__ == "__main__":
    sys.exit(main())
