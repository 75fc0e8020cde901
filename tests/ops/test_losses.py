"""ops/losses.py: losses torchlib cannot express, and both results of nll_loss_forward."""

from __future__ import annotations

import onnx
import pytest
import torch

import torch_onnx_fx

from helpers import assert_matches_eager

WEIGHT = torch.tensor([0.5, 1.0, 1.5, 2.0, 2.5])
TARGET = torch.tensor([0, 1, 2, 3, 4, 1])


@pytest.mark.parametrize("reduction", [0, 1, 2], ids=["none", "mean", "sum"])
@pytest.mark.parametrize("ignore_index", [-100, 2, 7], ids=["default", "a-class", "outside-the-classes"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_nll_loss_forward_gives_the_loss_and_the_total_weight_of_the_kept_targets(reduction, ignore_index, weighted):
    # The total weight is what ATen divides a mean by: the weights of the targets not ignored.
    # torchlib returned the loss's element count (1.0) for it.
    weight = WEIGHT if weighted else None

    def model(scores, target):
        return torch.ops.aten.nll_loss_forward(scores, target, weight, reduction, ignore_index)

    assert_matches_eager(model, (torch.randn(6, 5).log_softmax(-1), TARGET))


def test_nll_loss_forward_of_one_sample_and_of_only_ignored_targets():
    def one(scores, target):
        return torch.ops.aten.nll_loss_forward(scores, target, WEIGHT, 1, -100)

    def all_ignored(scores, target):  # mean over nothing: NaN, and a total weight of 0
        return torch.ops.aten.nll_loss_forward(scores, target, WEIGHT, 1, 2)

    assert_matches_eager(one, (torch.randn(5).log_softmax(-1), torch.tensor(3)))
    assert_matches_eager(all_ignored, (torch.randn(6, 5).log_softmax(-1), torch.full((6,), 2)))


def test_nll_loss2d_forward_over_pixels():
    def model(scores, target):
        return torch.ops.aten.nll_loss2d_forward(scores, target, WEIGHT, 1, 4)

    assert_matches_eager(model, (torch.randn(2, 5, 3, 4).log_softmax(1), torch.randint(0, 5, (2, 3, 4))))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("options", [{}, {"reduction": "none"}, {"weight": True}, {"ignore_index": 3}, {"label_smoothing": 0.1}])
def test_half_precision_cross_entropy_runs_as_atens_decomposition(dtype, options):
    """ONNX Runtime's bfloat16 SoftmaxCrossEntropyLoss did not load (its NegativeLogLikelihoodLoss
    takes no bfloat16); half scores now take log_softmax and nll_loss as ATen composes them."""
    torch.manual_seed(0)
    if options.get("weight"):
        options = {"weight": torch.rand(32).to(dtype)}
    scores, target = (torch.randn(16, 32) * 3).to(dtype), torch.randint(0, 32, (16,))
    assert_matches_eager(
        lambda a, t: torch.nn.functional.cross_entropy(a, t, **options), (scores, target), rtol=2e-2, atol=2e-2
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    "options",
    [{}, {"reduction": "none"}, {"reduction": "sum"}, {"weight": True}, {"ignore_index": 3}, {"spatial": True}, {"unbatched": True}],
)
def test_label_smoothed_cross_entropy_of_class_indices(dtype, options):
    # torchlib's SoftmaxCrossEntropyLoss leaves label_smoothing out: 0.23 off at reduction="none".
    torch.manual_seed(0)
    options = dict(options, label_smoothing=0.1)
    if options.pop("weight", False):
        options["weight"] = torch.rand(10, dtype=dtype)
    shape, target = ((16, 10), torch.arange(16) % 10)
    if options.pop("spatial", False):
        shape, target = (4, 10, 3, 2), torch.randint(0, 10, (4, 3, 2))
    if options.pop("unbatched", False):  # ONNX Runtime refused SoftmaxCrossEntropyLoss of [C] scores
        shape, target = (10,), torch.tensor(3)
    scores = torch.randn(*shape, dtype=dtype) * 3
    assert_matches_eager(lambda a, t: torch.nn.functional.cross_entropy(a, t, **options), (scores, target), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_float64_label_smoothed_cross_entropy_of_probabilities(reduction, dynamic):
    # 1 - smoothing and smoothing / classes were float32 constants: a float64 loss 5e-8 off.
    class Loss(torch.nn.Module):
        def forward(self, scores, target):
            return torch.nn.functional.cross_entropy(scores, target, label_smoothing=0.1, reduction=reduction)

    torch.manual_seed(0)
    scores = torch.randn(16, 10, dtype=torch.float64) * 3
    target = scores.flip(0).softmax(-1)
    classes = torch.export.Dim("classes")
    other = torch.randn(16, 7, dtype=torch.float64)
    assert_matches_eager(
        Loss(), (scores, target), dynamic_shapes=({1: classes}, {1: classes}) if dynamic else None,
        more_inputs=[((other, other.softmax(-1)), {})] if dynamic else (), rtol=1e-15, atol=1e-15,
    )


# Targets end at the first negative index; a listed class may repeat. PyTorch's decomposition read
# the indices after the -1 as class 0 (0.49 for eager's 0.26) and kept a batch dim of one.
MULTILABEL = [
    (torch.randn(10), torch.tensor([3, 0, -1, 1, 2, 5, 5, 5, 5, 5])),
    (torch.randn(10), torch.tensor([-1, 0, 3, 7, 9, 1, 2, 4, 5, 6])),
    (torch.randn(4, 6) * 3, torch.tensor([[0, 1, -1, 2, 2, 2], [5, 5, 5, 5, 5, 5], [-1, 1, 1, 1, 1, 1], [1, 2, 3, 4, 0, -1]])),
    (torch.randn(3, 7, dtype=torch.float64) * 3, torch.tensor([[6, 6, 0, -1, 1, 2, 3], [0, 1, 2, 3, 4, 5, 6], [2, -1, -1, 0, 0, 0, 0]])),
]


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("case", range(len(MULTILABEL)))
def test_multilabel_margin_loss_is_eager_bit_for_bit(case, reduction):
    scores, target = MULTILABEL[case]
    loss = torch.nn.MultiLabelMarginLoss(reduction=reduction)
    program = torch_onnx_fx.export(loss, (scores, target), verbose=False)
    actual, expected = program(scores, target), loss(scores, target)
    assert len(actual) == 1
    assert actual[0].shape == expected.shape and actual[0].dtype == expected.dtype
    # torch's fake kernel sizes one sample's reduction="none" as [1]: declared so, ONNX's checker
    # rejected the model.
    assert list(program.model.graph.outputs[0].shape) == list(expected.shape)
    onnx.checker.check_model(program.model_proto, full_check=True)
    if scores.dtype == torch.float32:  # float32 terms added in double, as ATen adds them
        assert torch.equal(actual[0], expected)
    else:  # float64 terms are added in another order than ATen's: an ulp
        torch.testing.assert_close(actual[0], expected, rtol=1e-15, atol=0)


def test_multilabel_margin_loss_of_dynamic_batch_and_classes():
    loss = torch.nn.MultiLabelMarginLoss(reduction="none")
    torch.manual_seed(0)
    assert_matches_eager(
        loss, (torch.randn(3, 5), torch.randint(-1, 5, (3, 5))), dynamic_shapes=({0: "n", 1: "c"}, {0: "n", 1: "c"}),
        more_inputs=[((torch.randn(7, 9), torch.randint(-1, 9, (7, 9))), {})], rtol=0, atol=0,
    )
