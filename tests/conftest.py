"""Shared fixtures: the CUDA marker skips cleanly, ../shared data is optional."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def shared_dir() -> Path:
    """``../shared`` beside the project; tests using it skip when it is absent."""
    if not SHARED.is_dir():
        pytest.skip("../shared is not present")
    return SHARED
