"""The one check of bad input every command must pass: exit code 2, one ``sbprof: error:`` line, nothing written."""
from __future__ import annotations

from pathlib import Path
from typing import Optional


def assert_refused(code: int, capsys, expected: str, nothing_in: Optional[Path] = None) -> str:
    """Exit code 2, one ``sbprof: error:`` line holding ``expected``, and ``nothing_in`` never made; returns the
    line."""
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("sbprof: error: ") and err.count("\n") == 1 and expected in err, err
    assert nothing_in is None or not nothing_in.exists(), f"{nothing_in} was written"
    return err.strip()
