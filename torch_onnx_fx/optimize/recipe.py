"""The optimize stage's recipe: what runs on the translated model, in order.

1. with ``fusion="onnxruntime"``, the cache ``Concat`` an attention kernel also computes dropped
   (``ort_fusions.share_present``); ``finalize``: inline torchlib's scripted functions, drop dead
   nodes (every export);
2. with ``optimize=True``, onnxscript's optimizer (``optimizer``: folding, rewrite rules, lifting,
   deduplication, common subexpressions) with the weights kept replaceable and folded only by the
   weight passes (``weights/``), then the ``fusion`` rewrites: with ``fusion="onnxruntime"`` ONNX
   Runtime's fused operators first (``ort_fusions``), then the standard's (``fusion``);
3. below opset 18, the graph built at 18 rewritten to the requested opset (``downgrade``), and
   finalized again;
4. int8 activations of a quantized graph shifted to uint8, the type ONNX Runtime's integer
   kernels take (``runtime/unsigned_activations``); float 1x1 convolutions of a quantized graph
   as products over channels, in the layout ONNX Runtime runs the integer ones in
   (``runtime/pointwise_conv``); integer convolutions over 3 input channels (an image network's
   stem) widened with zero channels to the 4 ONNX Runtime's fast kernel takes
   (``runtime/conv_input_channels``); the linear layers of a dynamically quantized graph as
   ONNX Runtime's integer ``MatMulInteger`` (``runtime/dynamic_products``); with ``fusion="onnxruntime"``,
   products with 4-bit weights as ONNX Runtime's ``MatMulNBits``
   (``matmul_nbits``), after the products with dequantized weights are laid out as ``Gemm``,
   and those of one input packed into one (``packed_projections``);
5. means over dims that may be empty at run time as sum / count, NaN there as in ATen
   (``runtime/empty_means``); integer sums and products ONNX Runtime would compute in double
   precision made exact (``runtime/integer_reductions``), float32 sums its kernels add element by element accumulated
   in double (``runtime/float_accumulation``), and nodes its CPU provider has no kernel for
   computed in a wider type (``runtime/kernel_gaps``); an ``Expand`` to an empty shape, which
   ONNX Runtime's optimizer drops, as a constant (``runtime/empty_expand``);
6. with ``export_modules_as_functions``, the chosen module instances outlined as calls of ONNX
   functions (``module_functions``), last, so the functions hold the optimized nodes;
7. the legacy ``custom_opsets`` imported, and the oldest IR version that holds every type used.
"""

from __future__ import annotations

import contextlib
from typing import Collection, Mapping

import onnx_ir as ir

from torch_onnx_fx import dtypes
from torch_onnx_fx.optimize import downgrade, fusion, optimizer
from torch_onnx_fx.optimize.matmul_nbits import MatMulNBitsPass
from torch_onnx_fx.optimize.module_functions import ModuleFunctionsPass
from torch_onnx_fx.optimize.ort_fusions import fuse_for_onnxruntime, share_present
from torch_onnx_fx.optimize.packed_projections import PackedNBitsPass
from torch_onnx_fx.optimize.quantized_pad import QuantizedPadPass
from torch_onnx_fx.optimize.runtime.conv_input_channels import ConvInputChannelsPass
from torch_onnx_fx.optimize.runtime.dequantized_weights import DequantizedWeightPass
from torch_onnx_fx.optimize.runtime.dynamic_products import DynamicIntegerProductPass
from torch_onnx_fx.optimize.runtime.empty_means import EmptyMeansPass
from torch_onnx_fx.optimize.runtime.integer_reductions import IntegerReductionsPass
from torch_onnx_fx.optimize.runtime.empty_expand import EmptyExpandPass
from torch_onnx_fx.optimize.runtime.exact_round_trips import ExactRoundTripsPass
from torch_onnx_fx.optimize.runtime.float_accumulation import FloatAccumulationPass
from torch_onnx_fx.optimize.runtime.kernel_gaps import KernelGapPass
from torch_onnx_fx.optimize.runtime.matrix_vector import MatrixVectorPass
from torch_onnx_fx.optimize.runtime.nan_propagation import NaNPropagationPass
from torch_onnx_fx.optimize.runtime.one_sided_clip import OneSidedClipPass
from torch_onnx_fx.optimize.runtime.pointwise_conv import PointwiseConvPass
from torch_onnx_fx.optimize.runtime.unsigned_activations import UnsignedActivationsPass
from torch_onnx_fx.optimize.weights.recipes import FoldWeightRecipesPass

__all__ = ["optimize_model"]


def optimize_model(
    model: ir.Model,
    *,
    opset_version: int,
    weights: Collection[str],
    optimize: bool = True,
    fusion_mode: str = fusion.DEFAULT_FUSION,
    extra_opsets: Mapping[str, int] | None = None,
    module_functions: bool | Collection[str] = False,
) -> dict[str, int]:
    """Run the recipe on ``model`` in place; how many of each fused operator the graph has.

    ``opset_version`` is the opset asked for (the model may have been built at a newer one);
    ``weights`` names the initializers ``apply_weights`` must be able to replace;
    ``module_functions`` is ``True`` (the repeated blocks) or the classes to outline as functions.
    """
    built_at = model.graph.opset_imports[""]
    fused: dict[str, int] = {}
    # Only an export making functions needs each node's module after the passes.
    carried = optimizer.module_stacks_carried(model) if module_functions is not False else contextlib.nullcontext()
    with carried:
        if fusion_mode == fusion.ONNXRUNTIME:
            share_present(model)
        optimizer.finalize(model)
        if optimize:
            optimizer.optimize(model, weights=weights)
            QuantizedPadPass()(model)
            if fusion_mode == fusion.ONNXRUNTIME:
                fused = fuse_for_onnxruntime(model)
                optimizer.tidy(model, weights)
            else:
                fused = fusion.fuse(model, fusion_mode)
        if opset_version < built_at:
            downgrade.DowngradeOpsetPass(opset_version)(model)
            optimizer.finalize(model)
        EmptyMeansPass()(model)
        IntegerReductionsPass()(model)
        FloatAccumulationPass()(model)
        NaNPropagationPass()(model)
        OneSidedClipPass()(model)
        MatrixVectorPass()(model)
        UnsignedActivationsPass()(model)
        PointwiseConvPass()(model)
        ConvInputChannelsPass()(model)
        DequantizedWeightPass()(model)
        DynamicIntegerProductPass()(model)
        if fusion_mode == fusion.ONNXRUNTIME:
            if MatMulNBitsPass()(model).modified:
                PackedNBitsPass()(model)
            fused.update(_counted(model, "MatMulNBits"))
        if KernelGapPass()(model).modified and optimize:
            # Weights a widened node reads are cast at every inference; stored cast instead.
            FoldWeightRecipesPass(weights)(model)
        ExactRoundTripsPass()(model)
        EmptyExpandPass()(model)
        if opset_version < built_at:
            downgrade.LateReductionsPass(opset_version)(model)
    if module_functions is not False:
        ModuleFunctionsPass(None if module_functions is True else module_functions, weights)(model)
    model.graph.opset_imports.update(extra_opsets or {})
    model.ir_version = dtypes.ir_version_for(model)
    return fused


def _counted(model: ir.Model, op_type: str) -> dict[str, int]:
    count = sum(1 for node in model.graph if node.op_type == op_type)
    return {op_type: count} if count else {}
