"""Shared fixtures. The Relay text samples are in tests/data/relay-samples (SOURCES.md there says
where each came from)."""

from __future__ import annotations

import sys
from collections import Counter
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


# -- the fixed-point oracle's case count (tests/fixed/fixed_cases.py), one line in pytest's summary ----------

#: The counts the parallel workers sent back (pytest-xdist), merged.
_WORKER_CASES: Counter = Counter()


def _local_cases() -> Counter:
    module = sys.modules.get("fixed_cases")
    return Counter(module.CASES) if module is not None else Counter()


def pytest_sessionfinish(session):
    """In a parallel worker: hand this worker's counts to the controller."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["fixed_cases"] = dict(_local_cases())


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    _WORKER_CASES.update(getattr(node, "workeroutput", {}).get("fixed_cases", {}))


def pytest_terminal_summary(terminalreporter):
    cases = _local_cases() + _WORKER_CASES
    if not cases:
        return
    failed = [r for r in terminalreporter.stats.get("failed", []) if "tests/fixed/" in r.nodeid]
    verdict = f"{len(failed)} test(s) FAILED" if failed else "all bit-exact"
    rules = ", ".join(f"{rule} {n}" for rule, n in sorted(cases.items()))
    terminalreporter.write_sep("-", f"fixed-point oracle: {sum(cases.values())} hypothesis cases compared, {verdict}")
    terminalreporter.write_line(f"cases by rule: {rules}")
