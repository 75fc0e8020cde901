"""Call adapters: how the graph walk fits a node's arguments to the translation it chose.

A few of ATen's conventions concern the call rather than the graph, and depend on the
translation chosen: Python numbers beside tensors (ATen types them by the tensors; a translation
wants them in the tensors' dtype), Python numbers beside complex tensors (whose real view is
``[re, im]``), and 0-d tensors given to ops with a dim argument (ONNX needs the axis to exist).
Each adapter says when it applies, changes the arguments before the call and, if it must, the
result after it. The walk runs them in order and knows none of them: look up, choose, adapt,
call, bind.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, Sequence

import onnx_ir as ir
import torch

from torch_onnx_fx.translate import zero_dim
from torch_onnx_fx.normalize import promotion
from torch_onnx_fx.dtypes import onnx_dtype
from torch_onnx_fx.registry import Translation
from torch_onnx_fx.translate.tracer import GraphTracer

__all__ = ["Call", "CallAdapter", "ScalarPromotion", "ComplexScalars", "RankOneLift", "ADAPTERS"]


@dataclasses.dataclass
class Call:
    """One translation call being prepared."""

    target: Any
    translation: Translation
    args: list[Any]
    example_args: Sequence[Any]
    example_result: Any
    tracer: GraphTracer
    lifted: bool = False


class CallAdapter(Protocol):
    def before(self, call: Call) -> None:
        """Adapt ``call.args`` in place."""

    def after(self, call: Call, result: Any) -> Any:
        """The result as the FX node's users expect it."""


class _BeforeOnly:
    def after(self, call: Call, result: Any) -> Any:
        return result


class ScalarPromotion(_BeforeOnly):
    """Numbers and symbolic sizes of an element-wise op in the op's computation dtype (the
    normalize stage did the tensors)."""

    def before(self, call: Call) -> None:
        rule = promotion.promotion_rule(call.target)
        if rule is not None:
            cast = lambda value, dtype: call.tracer.op("Cast", [value], {"to": dtype})  # noqa: E731
            call.args = promotion.promote_scalars(rule, call.args, call.example_args, cast)


class ComplexScalars(_BeforeOnly):
    """Python numbers meeting complex tensors become ``[real, imag]`` constants.

    Complex translations work on the real view (trailing dim 2); a number must be in the same
    form to broadcast against it. Only parameters sharing a type constraint with a complex tensor
    argument are complex.
    """

    def before(self, call: Call) -> None:
        signature = call.translation.signature
        if not call.translation.complex or signature is None:
            return
        params = list(signature.params)
        constraints = {
            param.type_constraint.name: example
            for param, example in zip(params, call.example_args)
            if isinstance(param, ir.schemas.Parameter) and isinstance(example, torch.Tensor) and example.is_complex()
        }
        if not constraints:
            return
        real_dtype = onnx_dtype(next(iter(constraints.values())).real.dtype)
        for i, (param, value) in enumerate(zip(params, call.args)):
            if (
                isinstance(param, ir.schemas.Parameter)
                and param.type_constraint.name in constraints
                and isinstance(value, (int, float, complex))
                and not isinstance(value, bool)
            ):
                number = complex(value)
                call.args[i] = call.tracer.constant([number.real, number.imag], real_dtype)


class RankOneLift:
    """A real 0-d ``self`` of an op with a dim argument is computed as ``[1]`` and reshaped back
    to the FX example's shape (see :mod:`zero_dim`)."""

    def before(self, call: Call) -> None:
        call.lifted = zero_dim.needs_rank_one(call.target, call.example_args)
        if call.lifted:
            call.args = zero_dim.lift_arguments(call.tracer, call.args, call.example_args)

    def after(self, call: Call, result: Any) -> Any:
        return zero_dim.restore(call.tracer, result, call.example_result) if call.lifted else result


ADAPTERS: tuple[CallAdapter, ...] = (ScalarPromotion(), ComplexScalars(), RankOneLift())
