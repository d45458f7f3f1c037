"""Shared fixtures. The Relay text samples are in tests/data/relay-samples (SOURCES.md there says
where each came from)."""

from __future__ import annotations

from pathlib import Path

import pytest

RELAY_SAMPLES = Path(__file__).resolve().parent / "data" / "relay-samples"


@pytest.fixture(scope="session")
def relay_samples() -> Path:
    """The folder of real Relay text samples; fails (not skips) when it is missing."""
    if not (RELAY_SAMPLES / "SOURCES.md").is_file():
        pytest.fail(f"Relay text samples not found at {RELAY_SAMPLES}")
    return RELAY_SAMPLES


@pytest.fixture(scope="session", autouse=True)
def private_driver_cache(tmp_path_factory):
    """Deploy-folder drivers are built into a cache of the test session's own (TIDLX_CACHE_DIR): the
    tests neither reuse nor leave builds in the user's ~/.cache/tidlx."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIDLX_CACHE_DIR", str(tmp_path_factory.mktemp("driver-cache")))
        yield


@pytest.fixture(scope="module")
def bev_pool_op():
    """BEVDet's bev_pool registered for one test module; later modules see the op registry as a new
    process would."""
    from tidlx.models import register_bev_pool, unregister_bev_pool

    register_bev_pool()
    yield
    unregister_bev_pool()
