"""Every CI model of the corpus (``tools/corpus/models.py``) exports and matches eager PyTorch.

Each model is exported once with its dynamic shapes and run in ONNX Runtime on its example inputs
and on a second input set of other dynamic sizes. The cases marked ``ci=False`` (exports of more
than about 3 s) are left to the model sweep, ``tools/sweeps/modelsweep.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from helpers import assert_matches_eager
from tools.corpus.models import CORPUS, ModelCase

# The models that cannot pass yet: (the exception, the precise cause). They run as strict xfails,
# so the fix shows up as an unexpected pass.
KNOWN_FAILURES: dict[str, tuple[type[BaseException], str]] = {}


def _param(case: ModelCase) -> Any:
    if case.name not in KNOWN_FAILURES:
        return pytest.param(case, id=case.name)
    raises, reason = KNOWN_FAILURES[case.name]
    return pytest.param(case, id=case.name, marks=pytest.mark.xfail(raises=raises, reason=reason, strict=True))


@pytest.mark.parametrize("case", [_param(case) for case in CORPUS if case.ci])
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


def test_known_failures_are_corpus_models() -> None:
    assert set(KNOWN_FAILURES) <= {case.name for case in CORPUS if case.ci}
