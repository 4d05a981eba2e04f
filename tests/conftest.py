"""Shared fixtures. Files from ../shared/ are read when present, never copied into the repo."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# ../shared beside the checkout; a git worktree one level deeper finds it further up.
SHARED = next((p / "shared" for p in ROOT.parents if (p / "shared" / "transcripts").is_dir()), ROOT.parent / "shared")
TRANSCRIPTS = SHARED / "transcripts"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def transcripts() -> Path:
    """The real transcripts folder; tests using it skip cleanly where it is absent."""
    if not TRANSCRIPTS.is_dir():
        pytest.skip("../shared/transcripts not present")
    return TRANSCRIPTS
