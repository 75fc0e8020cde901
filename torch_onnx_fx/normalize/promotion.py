"""Type promotion: make ATen's implicit dtype promotion explicit before a translation runs.

ATen computes ``int_tensor + 0.5`` in float and ``int_tensor / 2`` in float; ONNX ops require
their inputs to share one dtype, and torchlib's translations assume they do. For the elementwise
operators listed here we ask torch's own promotion rules (``elementwise_dtypes``) which dtype the
operation computes in, then cast tensor inputs and retype Python scalars to it.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import from_torch_dtype
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as Kind
from torch._prims_common import elementwise_dtypes

__all__ = ["promotion_rule", "computation_dtype", "promote_scalars", "INTEGRAL_TO_LONG", "DTYPE_ARGUMENT", "INDEX_LISTS"]

logger = logging.getLogger(__name__)

# name -> (kind, indices of the arguments taking part in promotion)
_BINARY = (0, 1)
_RULES: dict[str, tuple[Kind, tuple[int, ...]]] = {}


def _add(names: str, kind: Kind, indices: tuple[int, ...] = _BINARY) -> None:
    for name in names.split():
        _RULES[f"aten::{name}"] = (kind, indices)


_add(
    "add.Tensor add.Scalar sub.Tensor sub.Scalar mul.Tensor mul.Scalar rsub.Tensor rsub.Scalar "
    "maximum minimum fmax fmin remainder.Tensor remainder.Scalar fmod.Tensor fmod.Scalar "
    "floor_divide floor_divide.Scalar bitwise_and.Tensor bitwise_or.Tensor bitwise_xor.Tensor "
    "div.Tensor_mode div.Scalar_mode copysign.Tensor hypot nextafter "
    "logaddexp logaddexp2 heaviside min.other max.other __and__.Tensor __or__.Tensor __xor__.Tensor",
    Kind.DEFAULT,
)
# Aliases (divide, subtract, multiply, greater, ...) reach the graph under their own names when
# a decomposition or torch.masked uses them.
_add(
    "subtract.Tensor subtract.Scalar multiply.Tensor multiply.Scalar divide.Tensor_mode divide.Scalar_mode",
    Kind.DEFAULT,
)
_add(
    "div.Tensor div.Scalar true_divide.Tensor true_divide.Scalar divide.Tensor divide.Scalar atan2 arctan2 "
    "xlogy.Tensor xlogy.Scalar_Self xlogy.Scalar_Other special_xlog1py",
    Kind.INT_TO_FLOAT,
)
_add("pow.Tensor_Tensor pow.Tensor_Scalar", Kind.BOOL_TO_LONG)
_add(
    "eq.Tensor eq.Scalar ne.Tensor ne.Scalar lt.Tensor lt.Scalar le.Tensor le.Scalar "
    "gt.Tensor gt.Scalar ge.Tensor ge.Scalar logical_and logical_or logical_xor "
    "greater.Tensor greater.Scalar greater_equal.Tensor greater_equal.Scalar less.Tensor less.Scalar "
    "less_equal.Tensor less_equal.Scalar not_equal.Tensor not_equal.Scalar",
    Kind.ALWAYS_BOOL,
)
_add("where.self where.ScalarSelf where.ScalarOther where.Scalar", Kind.NO_OPMATH, (1, 2))
_add("lerp.Scalar lerp.Tensor", Kind.DEFAULT, (0, 1, 2))
_add("addcmul addcdiv", Kind.DEFAULT, (0, 1, 2))
# A clamp's bounds promote with the tensor: clamp(int tensor, 1.5, 3.5) is a float clamp in ATen
# (torchlib cast the bounds to the integers and returned 1.0 for 1.5).
_add("clamp clamp.Tensor", Kind.DEFAULT, (0, 1, 2))
_add("clamp_min clamp_min.Tensor clamp_max clamp_max.Tensor", Kind.DEFAULT)


# Float functions of one argument: ATen computes them on integer and bool tensors in the
# default float dtype (ONNX Runtime has no integer kernels for them at all).
_add(
    "exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh acosh "
    "atanh arcsin arccos arctan arcsinh arccosh arctanh sqrt rsqrt sigmoid erf erfc erfinv lgamma "
    "digamma reciprocal rad2deg deg2rad sinc logit i0 special_i0e special_i1 special_i1e "
    "special_ndtr special_ndtri special_log_ndtr special_erfcx special_expit special_entr "
    "special_bessel_j0 special_bessel_j1 special_spherical_bessel_j0 logsumexp angle",
    Kind.INT_TO_FLOAT,
    (0,),
)


def promotion_rule(target: Any) -> tuple[Kind, tuple[int, ...]] | None:
    """The rule of an ATen overload; an in-place overload (``add_.Tensor``) promotes as its
    functional form does."""
    if not isinstance(target, torch._ops.OpOverload):
        return None
    name = target.name()
    rule = _RULES.get(name)
    if rule is None and target._schema.is_mutable:
        base, _, overload = name.partition(".")
        rule = _RULES.get(base.rstrip("_") + (f".{overload}" if overload else ""))
    return rule


def _as_number(example: Any) -> Any:
    """Symbolic scalars promote like the Python numbers they stand for."""
    if isinstance(example, torch.SymBool):
        return True
    if isinstance(example, torch.SymInt):
        return 1
    if isinstance(example, torch.SymFloat):
        return 1.0
    return example


def computation_dtype(rule: tuple[Kind, tuple[int, ...]], example_args: Sequence[Any]) -> torch.dtype | None:
    """The dtype ATen computes an element-wise op in, from its participating arguments' examples
    (None when it cannot tell)."""
    kind, indices = rule
    participants = [_as_number(example_args[i]) for i in indices if i < len(example_args)]
    participants = [p for p in participants if isinstance(p, (torch.Tensor, bool, int, float, complex))]
    if not participants:
        return None
    # Comparisons and logical ops return bool but compute in the common dtype of their inputs.
    lookup_kind = Kind.DEFAULT if kind == Kind.ALWAYS_BOOL else kind
    try:
        return elementwise_dtypes(*participants, type_promotion_kind=lookup_kind)[1]
    except Exception as exc:  # noqa: BLE001 - no promotion then
        logger.debug("no promotion for %s: %s", participants, exc)
        return None


def promote_scalars(
    rule: tuple[Kind, tuple[int, ...]],
    args: list[Any],
    example_args: Sequence[Any],
    cast: Callable[[ir.Value, ir.DataType], ir.Value],
) -> list[Any]:
    """Return ``args`` with the promoting Python numbers and symbolic scalars in the computation
    dtype (tensors already are: the normalize stage converted them).

    ``example_args`` are the FX meta values at the same positions; ``cast`` inserts a Cast node.
    A symbolic size is a 0-d INT64/FLOAT/BOOL tensor in the graph and is cast like a tensor.
    """
    target_dtype = computation_dtype(rule, example_args)
    if target_dtype is None or target_dtype.is_complex:
        return args
    onnx_dtype = from_torch_dtype(target_dtype)
    promoted = list(args)
    for i in rule[1]:
        if i >= len(args):
            continue
        example, value = example_args[i], args[i]
        if isinstance(example, (torch.SymInt, torch.SymFloat, torch.SymBool)) and isinstance(value, ir.Value):
            if value.dtype != onnx_dtype:
                promoted[i] = cast(value, onnx_dtype)
        elif isinstance(value, bool) and target_dtype != torch.bool:
            promoted[i] = float(value) if target_dtype.is_floating_point else int(value)
        elif isinstance(value, int) and target_dtype.is_floating_point:
            promoted[i] = float(value)
        elif isinstance(value, int) and not isinstance(value, bool) and target_dtype != torch.bool:
            promoted[i] = _wrapped(value, target_dtype)
    return promoted


def _wrapped(value: int, dtype: torch.dtype) -> int:
    """``value`` as ATen converts a Python int for an integer tensor: modulo the dtype's width
    (``uint8_tensor == -1`` compares with 255, ``uint8_tensor * -1`` multiplies by 255)."""
    info = torch.iinfo(dtype)
    if info.min <= value <= info.max:
        return value
    span = info.max - info.min + 1
    return (value - info.min) % span + info.min


# Reductions that ATen accumulates in int64 for bool and integer inputs when no dtype is given
# (``bool_tensor.sum()`` counts); ONNX reduces in the input type and rejects bool.
INTEGRAL_TO_LONG = frozenset({
    "aten::sum", "aten::sum.dim_IntList", "aten::prod", "aten::prod.dim_int",
    "aten::cumsum", "aten::cumprod", "aten::nansum",
})

# Operators with a ``dtype`` argument meaning "convert the input first" (``softmax(x, 0,
# dtype=torch.float)`` is ``softmax(x.float(), 0)``).
DTYPE_ARGUMENT = INTEGRAL_TO_LONG | frozenset({
    "aten::softmax.int", "aten::log_softmax.int", "aten::mean", "aten::mean.dim", "aten::linalg_vector_norm",
})


# Advanced indexing translations feed their index tensors to ScatterND/GatherND, which take only
# int64 indices; ATen accepts any integer type (istft's decomposition indexes with int32).
INDEX_LISTS = frozenset({"aten::index.Tensor", "aten::_unsafe_index.Tensor", "aten::index_put", "aten::_unsafe_index_put"})
