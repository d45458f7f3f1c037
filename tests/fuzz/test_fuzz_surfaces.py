"""The fast version of ``make fuzz``: hypothesis mutates the seeds of every input surface
(fuzz/surfaces.py) and every input must succeed or raise a TidlxError. Each finding of the
coverage-guided runs is replayed from tests/fuzz/findings/."""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from fuzz.surfaces import SURFACES, check, seeds  # noqa: E402

FINDINGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "findings")

#: Findings not fixed yet (each a strict xfail, so a fix must remove it here).
OPEN = {}


def _finding_cases():
    out = []
    for name in sorted(os.listdir(FINDINGS)):
        mark = [pytest.mark.xfail(reason=OPEN[name], strict=True)] if name in OPEN else []
        out.append(pytest.param(name, marks=mark, id=name))
    return out


@pytest.mark.parametrize("name", _finding_cases())
def test_fuzz_finding_is_a_clean_error(name):
    surface = name.rsplit("-", 1)[0]
    with open(os.path.join(FINDINGS, name), "rb") as f:
        data = f.read()
    exc = check(surface, data)
    assert exc is None, f"{type(exc).__name__}: {exc}"


def _mutated(surface):
    base = st.sampled_from(seeds(surface))
    edit = st.tuples(st.integers(0, 1 << 20), st.sampled_from(["flip", "drop", "insert", "cut"]),
                     st.binary(min_size=1, max_size=4))

    @st.composite
    def build(draw):
        data = bytearray(draw(base))
        for pos, kind, blob in draw(st.lists(edit, max_size=4)):
            if not data:
                data += blob
                continue
            i = pos % len(data)
            if kind == "flip":
                data[i] ^= blob[0] or 1
            elif kind == "drop":
                del data[i:i + len(blob)]
            elif kind == "insert":
                data[i:i] = blob
            else:
                del data[i:]
        return bytes(data)

    return build()


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_mutated_inputs_give_clean_errors(surface):
    @settings(max_examples=60, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(_mutated(surface) if surface != "onnx-graph" else st.binary(min_size=9, max_size=32))
    def run(data):
        exc = check(surface, data)
        assert exc is None, f"{surface}: {type(exc).__name__}: {exc} on {data!r}"

    run()


@settings(max_examples=200, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(range(len(seeds("artifact")))),
       st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 7)), min_size=1, max_size=3))
def test_forged_network_records_read_and_run_or_give_clean_errors(seed, flips):
    """Bit flips behind a fixed-up size and CRC (a forged record, the fuzz surface 'artifact'): each
    record either runs or is an ArtifactError / FixedPointError; most flips land in weights and
    parameters, which is where the runtime's assumptions live."""
    data = bytearray(seeds("artifact")[seed])
    for pos, bit in flips:
        data[pos % len(data)] ^= 1 << bit
    exc = check("artifact", bytes(data))
    assert exc is None, f"{type(exc).__name__}: {exc}"
