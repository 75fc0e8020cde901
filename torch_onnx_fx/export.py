"""``export``: the public entry, composing the pipeline.

options → capture → decompose → translate → annotate → optimize → name → ``ONNXProgram``.
The signature is ``torch.onnx.export``'s, legacy arguments included, so replacing the call is a
one-word change; :mod:`torch_onnx_fx.options` decides what the arguments mean.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
from typing import Any, Callable, Collection, Iterator, Mapping, Sequence

import onnx_ir as ir
import torch

from torch_onnx_fx import options as options_module
from torch_onnx_fx.program import naming
from torch_onnx_fx.optimize import downgrade
from torch_onnx_fx.optimize import optimize_model
from torch_onnx_fx.translate import metadata as annotate
from torch_onnx_fx.translate import walk as translate
from torch_onnx_fx.normalize import decomposition as decompose
from torch_onnx_fx.normalize import sequence as normalize
from torch_onnx_fx.capture import strategies as capture
from torch_onnx_fx import _state, dtypes, ops
from torch_onnx_fx.optimize import fusion as fusion_stage
from torch_onnx_fx.capture.dynamic_shapes import prepare_dynamic_shapes
from torch_onnx_fx.options import DEFAULT_OPSET, TORCHLIB_OPSET, UNSET
from torch_onnx_fx.program import ONNXProgram
from torch_onnx_fx import diagnostics
from torch_onnx_fx.progress import Progress
from torch_onnx_fx.registry import TranslationTable
from torch_onnx_fx.signature import ProgramSignature

__all__ = ["export", "DEFAULT_OPSET", "TORCHLIB_OPSET"]

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def _in_export() -> Iterator[None]:
    previous = _state.IN_ONNX_EXPORT
    _state.IN_ONNX_EXPORT = True
    try:
        yield
    finally:
        _state.IN_ONNX_EXPORT = previous


@contextlib.contextmanager
def _collector_spared() -> Iterator[Callable[[], None]]:
    """Keep Python's cyclic garbage collector off the objects that outlive the export.

    Translation and optimization create millions of small objects; every full collection then
    walks the model, torch's state and the captured program too, though none of it can be garbage
    until the export ends: a quarter of the post-capture time on a 64-layer Llama. Objects alive
    at the start, and (by calling the yielded function) those of the captured program, are moved
    out of the collector's reach (``gc.freeze``) until the export ends; peak memory unchanged
    within 1 %. A process that froze objects itself is left as it is.
    """
    if gc.get_freeze_count():
        yield lambda: None
        return
    gc.freeze()
    try:
        yield gc.freeze
    finally:
        gc.unfreeze()


def export(
    model: torch.nn.Module | torch.export.ExportedProgram | Callable[..., Any],
    args: tuple[Any, ...] | Any = (),
    f: str | os.PathLike[str] | None = None,
    *,
    kwargs: Mapping[str, Any] | None = None,
    verbose: bool | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    opset_version: int | None = None,
    dynamo: bool = True,
    external_data: bool = True,
    dynamic_shapes: Mapping[str, Any] | tuple[Any, ...] | list[Any] | None = None,
    custom_translation_table: Mapping[Any, Any] | None = None,
    report: bool = False,
    optimize: bool = True,
    fusion: str = fusion_stage.DEFAULT_FUSION,
    verify: bool = False,
    profile: bool = False,
    dump_exported_program: bool = False,
    artifacts_dir: str | os.PathLike[str] = ".",
    export_params: bool = True,
    keep_initializers_as_inputs: bool = False,
    dynamic_axes: Mapping[str, Mapping[int, str]] | Mapping[str, Sequence[int]] | None = None,
    state_outputs: bool = False,
    training: Any = UNSET,
    operator_export_type: Any = UNSET,
    do_constant_folding: Any = UNSET,
    custom_opsets: Mapping[str, int] | None | Any = UNSET,
    export_modules_as_functions: bool | Collection[type[torch.nn.Module]] | Any = UNSET,
    autograd_inlining: Any = UNSET,
) -> ONNXProgram:
    """Export ``model`` to ONNX through torch.export; a drop-in for ``torch.onnx.export(dynamo=True)``.

    Returns an :class:`ONNXProgram`. When ``f`` is given the model is also saved there, honouring
    ``external_data``, ``export_params`` and ``keep_initializers_as_inputs``. The graph's outputs
    are the model's outputs (``None`` left out); ``state_outputs=True`` appends the new values of
    buffers and inputs the model mutates. ``fusion`` (not a torch.onnx argument) chooses fused
    operators: ``"standard"`` (default) those of the ONNX standard where the opset has them (opset 23:
    Attention, RMSNormalization, RotaryEmbedding), ``"none"`` none (see :mod:`torch_onnx_fx.optimize.fusion`).
    """
    legacy = dict(
        training=training, operator_export_type=operator_export_type, do_constant_folding=do_constant_folding,
        custom_opsets=custom_opsets, export_modules_as_functions=export_modules_as_functions,
        autograd_inlining=autograd_inlining,
    )
    opts = options_module.resolve(
        model, args, kwargs=kwargs, f=f, verbose=verbose, input_names=input_names, output_names=output_names,
        opset_version=opset_version, dynamo=dynamo, external_data=external_data, dynamic_shapes=dynamic_shapes,
        custom_translation_table=custom_translation_table, report=report, optimize=optimize, verify=verify,
        profile=profile, dump_exported_program=dump_exported_program, artifacts_dir=artifacts_dir,
        export_params=export_params, keep_initializers_as_inputs=keep_initializers_as_inputs,
        dynamic_axes=dynamic_axes, state_outputs=state_outputs, legacy=legacy, fusion=fusion,
    )
    progress = Progress(enabled=opts.verbose is not False)
    with _in_export(), _collector_spared() as spare, diagnostics.session(model, opts.args, opts.kwargs, progress, **opts.diagnostics) as session:
        onnx_program = _pipeline(model, opts, progress, session, spare)
        if opts.verify:
            with progress.phase("verify") as phase:
                phase.detail = session.verify(onnx_program)
        if opts.f is not None:
            with progress.phase("save") as phase:
                onnx_program.save(
                    opts.f,
                    include_initializers=opts.export_params,
                    keep_initializers_as_inputs=opts.keep_initializers_as_inputs,
                    external_data=opts.external_data,
                )
                phase.detail = os.fspath(opts.f)
        if opts.verbose:
            print(onnx_program.model)
    return onnx_program


def _pipeline(model: Any, opts: options_module.ExportOptions, progress: Progress, session: Any, spare: Callable[[], None]) -> ONNXProgram:
    """capture → decompose → translate → annotate → optimize → name, for one normalised call."""
    is_program = isinstance(model, torch.export.ExportedProgram)
    prepared_shapes, dim_names = (None, None) if is_program else prepare_dynamic_shapes(model, opts.args, opts.kwargs, opts.dynamic_shapes)

    with progress.phase("capture") as phase:
        captured = capture.capture(model, opts.args, opts.kwargs, prepared_shapes)
        phase.detail = captured.strategy
    session.captured(captured)
    spare()
    # Opsets below 18 are built at 18 and rewritten at the end (torch_onnx_fx.optimize.downgrade).
    build_opset = max(opts.opset_version, downgrade.BUILD_OPSET)
    table = TranslationTable(ops.builtin_table(), opts.custom_translation_table, build_opset, fused_translations=opts.fusion != "none")

    with progress.phase("decompose") as phase:
        decomposed = decompose.decompose(captured.exported_program, table)
        phase.detail = f"{len(decomposed.decomposed)} operator(s) decomposed" if decomposed.retraced else "not needed"
    program = decomposed.exported_program
    session.decomposed(decomposed, table)
    normalize.normalize(program, table)
    signature = ProgramSignature.of(program)

    missing = translate.untranslatable_nodes(program.graph_module, table)
    if missing:
        raise translate.missing_translation_error(missing, table)
    symbols = naming.symbol_names(signature, dim_names, opts.args, opts.kwargs)

    with progress.phase("translate") as phase:
        graph, tracer = translate.translate(
            program, table, opset_version=build_opset, symbol_names=symbols, signature=signature,
            state_outputs=opts.state_outputs, progress=progress.step,
        )
        phase.detail = f"{len(graph)} ONNX nodes from {len(program.graph.nodes)} FX nodes"
    annotate.annotate_graph(graph, program)
    model_ir = ir.Model(
        graph,
        ir_version=dtypes.DEFAULT_IR_VERSION,
        producer_name="torch_onnx_fx",
        producer_version=_state.version(),
        functions=list(tracer.functions.values()),
    )

    with progress.phase("optimize") as phase:
        fused = optimize_model(
            model_ir, opset_version=opts.opset_version, weights=signature.state_names, optimize=opts.optimize,
            fusion_mode=opts.fusion, extra_opsets=opts.extra_opsets,
        )
        phase.detail = f"{len(model_ir.graph)} nodes" + ("" if opts.optimize else " (optimize=False)")
        if fused:
            phase.detail += "; fused " + ", ".join(f"{n} {name}" for name, n in fused.items())

    naming.rename_inputs(graph, opts.input_names, signature)
    naming.rename_outputs(graph, opts.output_names)
    if opts.dynamic_axes is not None:
        naming.apply_output_axes(graph, opts.dynamic_axes, opts.input_names or [])
    annotate.annotate_outputs(graph, signature.graph_outputs(opts.state_outputs))

    onnx_program = ONNXProgram(
        model_ir,
        program,
        capture_strategy=captured.strategy,
        capture_failures=captured.failures,
        decomposed=decomposed.decomposed,
        signature=signature,
        state_outputs=opts.state_outputs,
    )
    onnx_program.capture_refinements = captured.refinements
    onnx_program.verbose = opts.verbose is not False
    session.exported(onnx_program)
    return onnx_program
