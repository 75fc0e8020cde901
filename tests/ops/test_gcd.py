"""gcd and lcm of integers (ops/arithmetic.py): Euclid in a Loop, the bits of ATen's.

torch decomposes both to prims::gcd, which had no translation."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager

EDGES = {
    torch.int8: [0, 1, -1, 127, -128, 12, -18, 64, 96],
    torch.uint8: [0, 1, 255, 12, 18, 64, 96, 128, 200],
    torch.int16: [0, 1, -1, 32767, -32768, 1200, -1800, 4096, 6144],
    # The lowest int32/int64 values are left out: ATen's own remainder traps on them (SIGFPE).
    torch.int32: [0, 1, -1, 2**31 - 1, -(2**31) + 1, 1836311903, 1134903170, -12, 18],
    # Consecutive Fibonacci numbers: Euclid's longest run in int64.
    torch.int64: [0, 1, -1, 2**63 - 1, -(2**63) + 1, 7540113804746346429, 4660046610375530309, -12, 18],
}


@pytest.mark.parametrize("dtype", list(EDGES), ids=str)
def test_gcd_and_lcm_of_edge_values(dtype):
    values = torch.tensor(EDGES[dtype], dtype=dtype)
    a, b = values.repeat_interleave(len(values)), values.repeat(len(values))
    assert_matches_eager(lambda x, y: (torch.gcd(x, y), torch.lcm(x, y)), (a, b), rtol=0, atol=0)


def test_gcd_broadcasts_and_takes_empty_tensors():
    a = torch.randint(-1000, 1000, (4, 1, 5))
    b = torch.randint(-1000, 1000, (3, 1))
    assert_matches_eager(lambda x, y: torch.gcd(x, y), (a, b), rtol=0, atol=0)
    empty = (torch.zeros(0, 3, dtype=torch.int64), torch.ones(3, dtype=torch.int64))
    assert_matches_eager(lambda x, y: torch.gcd(x, y), empty, rtol=0, atol=0)
