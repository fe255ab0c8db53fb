"""Where things are, from one place rather than by counting ``Path(__file__).parents`` in each test."""
from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
DATA = TESTS / "data"
"""Results files kept from earlier versions of sbprof."""
EXAMPLE_AUDIO = ROOT / "sbprof" / "data" / "example_audio.wav"
