"""An ``Expand`` to an empty shape keeps its empty result (ONNX Runtime's optimizer dropped it)."""

from __future__ import annotations

import torch

from helpers import assert_matches_eager


def test_expand_of_a_size_one_dim_to_zero_stays_empty() -> None:
    # Read by another node, ONNX Runtime's basic optimizations took Expand(x[1, 2, 1], [0, 2, 0])
    # for x itself.
    program = assert_matches_eager(lambda x: (torch.relu(x).expand(0, 2, 0) + 1, x * 2), (torch.randn(1, 2, 1),))
    assert "Expand" not in [node.op_type for node in program.model.graph]


def test_broadcast_tensors_of_empty_half_precision_tensors() -> None:
    # The differential fuzzer's case: bfloat16 Expand runs in float32 between two Casts.
    args = (torch.randn(0), torch.randn(1, 2, 1), torch.randn(1, 1), torch.randn(0, 1, 1))
    for dtype in (torch.bfloat16, torch.float16):
        assert_matches_eager(lambda *t: torch.broadcast_tensors(*t), tuple(a.to(dtype) for a in args))
