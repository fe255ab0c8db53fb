"""What every subcommand shares: exit codes, one-line errors, the list of files written."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, Optional, TextIO

EXIT_OK = 0
EXIT_FAILED = 1
"""The job could not go on (a model that does not load, a full disk)."""
EXIT_CONFIG = 2
"""Bad input (configuration, command line, results file, output folder in use): nothing measured."""
EXIT_INTERRUPTED = 130


def error(message: str) -> None:
    """One line on standard error, ``sbprof: error: ...``."""
    print(f"sbprof: error: {' '.join(str(message).split())}", file=sys.stderr)


def print_outputs(outputs: Dict[str, Path], file: Optional[TextIO] = None) -> None:
    """One ``name: path`` line per file a command wrote (on ``file``; standard output as it is when called)."""
    for name, path in outputs.items():
        print(f"{name}: {path}", file=file or sys.stdout)
