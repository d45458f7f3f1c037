"""Shared fixtures. The Relay text samples live outside the repo, in ../shared/relay-samples
(beside the checkout, as on developer machines and in CI); they are never copied in."""

from __future__ import annotations

from pathlib import Path

import pytest

RELAY_SAMPLES = Path(__file__).resolve().parents[1].parent / "shared" / "relay-samples"


@pytest.fixture(scope="session")
def relay_samples() -> Path:
    """The folder of real Relay text samples; fails (not skips) when it is missing."""
    if not (RELAY_SAMPLES / "SOURCES.md").is_file():
        pytest.fail(f"Relay text samples not found at {RELAY_SAMPLES} (expected ../shared/relay-samples "
                    f"beside the repository)")
    return RELAY_SAMPLES
