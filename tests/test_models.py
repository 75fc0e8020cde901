"""Every model of the corpus (``tools/models.py``) exports and matches eager PyTorch.

Each model is exported once with its dynamic shapes and run in ONNX Runtime on its example inputs
and on a second input set of other dynamic sizes.
"""

from __future__ import annotations

import pytest

from helpers import assert_matches_eager
from tools.models import CORPUS, ModelCase


# A model that cannot pass yet goes in as pytest.param(case, marks=pytest.mark.xfail(raises=...,
# reason="<the precise cause>", strict=True)), so the fix shows up as an unexpected pass.
@pytest.mark.parametrize("case", [pytest.param(case, id=case.name) for case in CORPUS])
# torch's own nn.RNN re-assigns its flat weights while torch.export traces it; nothing to act on.
@pytest.mark.filterwarnings("ignore:The tensor attributes self.rnn._flat_weights:UserWarning")
def test_model_matches_eager(case: ModelCase) -> None:
    model, args, kwargs, dynamic_shapes = case.build()
    more_inputs = [case.second_inputs()] if case.second_inputs is not None else []
    assert_matches_eager(
        model,
        args,
        kwargs,
        dynamic_shapes=dynamic_shapes,
        more_inputs=more_inputs,
        rtol=case.rtol,
        atol=case.atol,
    )


def test_corpus_names_are_unique() -> None:
    names = [case.name for case in CORPUS]
    assert len(names) == len(set(names)), names
