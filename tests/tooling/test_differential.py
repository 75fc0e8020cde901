"""The differential fuzzer (tools/sweeps/differential.py): its regression cases and a short random run.

Each regression case is one class of silent or loud failure the fuzzer found on e6900ba (strided
views, integer overflow, nll_loss's total weight, sizes of -1, size-dependent branches); each must
now match eager, be refused with a clear error, or be specialized (the graph's size conditions
stop a run at sizes it is not valid for). The random run is a fixed selection, so a failure here
is reproducible with ``python tools/sweeps/differential.py --cases N --seed S``.
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("expecttest", reason="the OpInfo database needs expecttest: pip install expecttest")

from tools.sweeps import differential  # noqa: E402

RANDOM_CASES = int(os.environ.get("TORCH_ONNX_FX_DIFFERENTIAL_CASES", "40"))
RANDOM_SEED = 26


@pytest.fixture(scope="module")
def operators() -> dict:
    return differential.operators()


@pytest.mark.parametrize("case", differential.REGRESSIONS, ids=lambda c: f"{c.op}-{c.dtype}-{c.variant}-{c.sample}")
def test_regression_case_is_exact_or_refused(operators: dict, case: differential.Case) -> None:
    (result,) = differential.run_case(case, opinfo=operators[case.op])
    # A regression case that no longer reaches the exporter would pass for nothing.
    assert result.status in ("pass", "refused", "specialized"), f"{result.status}: {result.detail} ({result.inputs})"


@pytest.mark.parametrize("case", differential.select_cases(RANDOM_CASES, RANDOM_SEED), ids=lambda c: f"{c.op}-{c.dtype}-{c.variant}")
def test_random_case_is_never_silently_wrong(operators: dict, case: differential.Case) -> None:
    (result,) = differential.run_case(case, opinfo=operators[case.op])
    assert result.status not in differential.SILENT, f"{result.status}: {result.detail} ({result.inputs})"


def test_a_wrong_result_is_a_mismatch(operators: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    # The verdict must see a wrong number: the same case with the graph's outputs perturbed.
    real = differential._export

    def perturbed(exporter, program, args):
        onnx_program = real(exporter, program, args)

        def call(*inputs):
            return [t + 1 for t in onnx_program(*inputs)]

        return call

    monkeypatch.setattr(differential, "_export", perturbed)
    (result,) = differential.run_case(differential.Case("add", "float32", "permuted"), opinfo=operators["add"])
    assert result.status == "mismatch", result
