"""The batch reason on a batch-1 transformer: torchvision's ViT/Swin attention moves the
token axis to dimension 0 (nn.MultiheadAttention is sequence-first), and TIDL reads dimension 0 as
the batch. The reason says so and what helps; it suggests TIDL_RELAY_MAX_BATCH_SIZE only when the
model's own batch is above the limit."""

import pytest

import tidlx
from tidlx.backends.tidl.options import BATCH_ENV_VAR

ATTENTION = """#[version = "0.0.5"]
def @main(%x: Tensor[({n}, 197, 64), float32], %w: Tensor[(64, 64), float32]) {{
  %0 = transpose(%x, axes=[1, 0, 2]);
  %1 = reshape(%0, newshape=[{m}, 64]);
  %2 = nn.dense(%1, %w, units=64);
  %3 = reshape(%2, newshape=[197, {n}, 64]);
  transpose(%3, axes=[1, 0, 2])
}}
"""


def host_reasons(n, **options):
    mod = tidlx.parse_relay(ATTENTION.format(n=n, m=197 * n))
    _, report = tidlx.partition(mod, options or None)
    return [h.reason for h in report.host_ops]


def test_token_axis_at_batch_1_is_not_a_batch_to_raise(monkeypatch):
    monkeypatch.delenv(BATCH_ENV_VAR, raising=False)
    reasons = host_reasons(1)
    assert reasons, "the (197, 64) dense must stay on the host"
    for reason in reasons:
        assert BATCH_ENV_VAR not in reason and "max_batch_size" not in reason, reason
        if reason.startswith("transpose"):
            continue  # refused by its own rule (it moves axis 0)
        assert "TIDL reads dimension 0 as the batch" in reason
        assert "the model's batch is 1" in reason and "keep a leading 1" in reason
    dense = next(r for r in reasons if r.startswith("nn.dense"))
    assert "the output (197, 64) has 197 there" in dense and "e.g. (1, 197, 64)" in dense


def test_a_real_batch_still_suggests_the_variable(monkeypatch):
    monkeypatch.delenv(BATCH_ENV_VAR, raising=False)
    reasons = host_reasons(6)
    assert any(f"batch 1182 > {BATCH_ENV_VAR}=1: set the environment variable" in r for r in reasons)


def test_a_batch_6_model_keeps_its_advice(monkeypatch):
    monkeypatch.delenv(BATCH_ENV_VAR, raising=False)
    mod = tidlx.parse_relay("""#[version = "0.0.5"]
def @main(%x: Tensor[(6, 3, 8, 8), float32]) {
  nn.relu(%x)
}
""")
    _, report = tidlx.partition(mod)
    assert [h.reason for h in report.host_ops] == [
        f"nn.relu: batch 6 > {BATCH_ENV_VAR}=1: set the environment variable {BATCH_ENV_VAR}=6 or the option "
        f"max_batch_size=6"]
