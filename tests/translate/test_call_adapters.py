"""Call adapters: the walk fits arguments to the chosen translation through them alone."""

from __future__ import annotations

import pytest
import torch

from torch_onnx_fx.translate import call_adapters

from helpers import Fn, assert_matches_eager


def test_adapters_run_in_their_declared_order():
    kinds = [type(a) for a in call_adapters.ADAPTERS]
    assert kinds == [call_adapters.ScalarPromotion, call_adapters.ComplexScalars, call_adapters.RankOneLift]


CASES = {
    # ScalarPromotion: an int tensor plus a float number computes in float.
    "scalar_promotion": (lambda x: x + 0.5, lambda: (torch.arange(4),)),
    # ComplexScalars: a Python complex number beside a complex tensor is [re, im].
    "complex_scalar": (lambda z: z * (2 - 1j) + 1j, lambda: (torch.randn(3, dtype=torch.complex64),)),
    # RankOneLift: a 0-d self of an op with a dim argument, reshaped back to 0-d.
    "rank_one_lift": (lambda x: torch.cumsum(x, 0) + torch.softmax(x, 0), lambda: (torch.tensor(1.5),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_adapted_calls_match_eager(name):
    fn, make_args = CASES[name]
    assert_matches_eager(Fn(fn), make_args())
