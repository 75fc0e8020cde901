"""The whole-range sweep of elementwise functions (tools/sweeps/tails.py): its measure and two ops.

The measure decides what the sweep calls silently wrong, so it is checked on values whose
distance in ulps is known, on an implementation that cancels in its tail (erfc as ``1 - erf``,
as torchlib computes it), and on the special-value rule. Then erfc and sigmoid, the two tails
this sweep found wrong, run end to end: every point within the rule.
"""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("expecttest", reason="the OpInfo database needs expecttest: pip install expecttest")

from tools.sweeps import tails  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_ulps_counts_representable_steps(dtype: torch.dtype) -> None:
    info = torch.finfo(dtype)
    subnormal = info.smallest_normal * info.eps
    reference = torch.tensor([1.0, 1.0, 1000.0, 0.0, subnormal, info.max], dtype=torch.float64)
    one_up = torch.nextafter(torch.tensor(1.0, dtype=dtype), torch.tensor(2.0, dtype=dtype))
    thousand_down = torch.nextafter(torch.tensor(1000.0, dtype=dtype), torch.tensor(0.0, dtype=dtype))
    values = torch.stack([
        one_up, torch.tensor(1.0, dtype=dtype), thousand_down, torch.tensor(3 * subnormal, dtype=dtype),
        torch.tensor(0.0, dtype=dtype), torch.tensor(info.max, dtype=dtype),
    ])
    assert tails.ulps(values, reference, dtype).tolist() == [1.0, 0.0, 1.0, 3.0, 1.0, 0.0]


def test_grid_spans_the_range_once_each() -> None:
    values = tails.grid(torch.float16, edges=[0.5])
    finite = values[values.isfinite()]
    assert finite.min() == -torch.finfo(torch.float16).max and finite.max() == torch.finfo(torch.float16).max
    assert finite.abs()[finite != 0].min() == torch.finfo(torch.float16).smallest_normal * torch.finfo(torch.float16).eps
    assert values.isnan().sum() == 1 and (values == math.inf).sum() == 1 and (values == -math.inf).sum() == 1
    assert torch.unique(finite.float()).numel() == finite.numel() - 1  # 0.0 and -0.0, once each
    assert (finite == torch.nextafter(torch.tensor(0.5, dtype=torch.float16), torch.tensor(1.0, dtype=torch.float16))).any()


def test_a_cancelling_tail_is_flagged_and_eager_is_not() -> None:
    x = torch.tensor([0.5, 2.0, 3.0, 4.0, 9.0, 30.0])
    reference = torch.special.erfc(x.double())
    ours, eager = tails.measure(x, 1 - torch.erf(x), torch.special.erfc(x), reference, max_ulps=16, factor=4)
    assert ours.flagged == 4 and ours.worst is not None and ours.worst["x"] >= 3.0  # 0.5 and 2.0 survive
    assert eager.max_ulps <= 2 and math.isinf(ours.max_ulps) is False


def test_special_values_are_judged_against_eager_and_the_truth() -> None:
    x = torch.tensor([1e38, -1e38, 89.0])
    reference = torch.tensor([1e38, math.inf, math.exp(89.0)], dtype=torch.float64)  # exp(89) overflows float32
    eager = torch.tensor([math.inf, math.inf, math.inf])  # overflowing where the truth does not, at 1e38
    got = torch.tensor([1e38, math.nan, math.inf])
    ours, _ = tails.measure(x, got, eager, reference, max_ulps=16, factor=4)
    assert ours.flagged == 1 and ours.worst is not None and ours.worst["x"] == float(x[1])  # NaN for inf; 1e38 is right


@pytest.mark.parametrize("op", ["erfc", "sigmoid"])
def test_fixed_tails_hold_over_the_whole_float32_range(op: str) -> None:
    (record,) = tails.sweep(op, "float32", [tails.OURS], max_ulps=16, factor=4)
    assert record["status"] == "ok", record
    assert record["points"] > 3000 and record["max_ulps"] <= 4


def test_mpmath_reference_is_exact_and_nan_off_the_real_line() -> None:
    x = torch.tensor([1e-20, 0.5, -2.0, 710.0, math.inf], dtype=torch.float64)
    sinh = tails.mpmath_reference("sinh", x)
    assert sinh is not None and sinh[:2].tolist() == [1e-20, math.sinh(0.5)] and math.isclose(sinh[3], math.sinh(710.0), rel_tol=2**-52)
    log = tails.mpmath_reference("log", x)
    assert log is not None and log[2].isnan() and log[4].isnan()  # complex at -2; limits are eager's
    assert tails.mpmath_reference("nn.functional.hardswish", x) is None


def test_binary_ops_run_on_every_pair_of_the_grid() -> None:
    first, second = tails.pair_grid(torch.float32, per_sign=10)
    assert first.shape == second.shape == (39 * 39,)
    assert {"pow", "atan2", "hypot", "xlogy", "igammac"} <= set(tails.binary_ops())
    assert not any("polynomial" in name or name in ("eq", "gcd") for name in tails.binary_ops())
    # xlogy(0, nan) was 0 (torchlib's order of cases); eager's NaN is now kept.
    (record,) = tails.sweep("xlogy", "float32", [tails.OURS], max_ulps=16, factor=4)
    assert record["status"] == "ok", record
