"""``export``: the public entry, composing the pipeline one stage a line.

options → capture → normalize → translate → optimize → program (with diagnostics around it).
The signature is ``torch.onnx.export``'s, legacy arguments included, so replacing the call is a
one-word change; it is declared once, with each argument's check and documentation, in
:mod:`torch_onnx_fx.options`, which also decides what one call's arguments mean.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from typing import Any, Iterator

import torch

from torch_onnx_fx import _state, capture, diagnostics, normalize, ops, options, translate
from torch_onnx_fx.capture.size_conditions import size_conditions
from torch_onnx_fx.optimize import optimize_model
from torch_onnx_fx.optimize.downgrade import BUILD_OPSET
from torch_onnx_fx.optimize.fusion import ONNXRUNTIME
from torch_onnx_fx.options import DEFAULT_OPSET, TORCHLIB_OPSET, ExportOptions
from torch_onnx_fx.program import ONNXProgram, naming
from torch_onnx_fx.progress import Progress
from torch_onnx_fx.registry import TranslationTable
from torch_onnx_fx.signature import ProgramSignature

__all__ = ["export", "DEFAULT_OPSET", "TORCHLIB_OPSET"]


@contextlib.contextmanager
def _in_export() -> Iterator[None]:
    previous = _state.IN_ONNX_EXPORT
    _state.IN_ONNX_EXPORT = True
    try:
        yield
    finally:
        _state.IN_ONNX_EXPORT = previous


def export(model: Any, args: Any = (), f: Any = None, **arguments: Any) -> ONNXProgram:
    """Export ``model`` to ONNX through torch.export; a drop-in for ``torch.onnx.export(dynamo=True)``.

    Returns an :class:`ONNXProgram`. When ``f`` is given the model is also saved there, honouring
    ``external_data``, ``export_params`` and ``keep_initializers_as_inputs``. The graph's outputs
    are the model's outputs (``None`` left out); ``state_outputs=True`` appends the new values of
    buffers and inputs the model mutates. Every argument after ``f`` is keyword-only; the
    signature and the list below come from their declaration in :mod:`torch_onnx_fx.options`.
    """
    opts = options.resolve(model, args, f, arguments)
    progress = Progress(enabled=opts.verbose is not False)
    with _in_export(), _state.collector_paused(), diagnostics.session(model, opts.args, opts.kwargs, progress, **opts.diagnostics) as session:
        onnx_program = _pipeline(model, opts, progress, session)
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


export.__signature__ = options.signature()  # type: ignore[attr-defined]
export.__doc__ = f"{export.__doc__}\n    {options.argument_docs().replace(chr(10), chr(10) + '    ')}\n"


def _pipeline(model: Any, opts: ExportOptions, progress: Progress, session: Any) -> ONNXProgram:
    """The stages, in order, for one resolved call; each phase is timed and reported."""
    is_program = isinstance(model, torch.export.ExportedProgram)
    shapes, dim_names = (None, None) if is_program else capture.prepare(model, opts.args, opts.kwargs, opts.dynamic_shapes)
    with progress.phase("capture") as phase:
        captured = capture.capture(model, opts.args, opts.kwargs, shapes, quiet=opts.verbose is not True, blocks=opts.module_functions)
        phase.detail = captured.strategy
        if captured.blocks_replayed:
            phase.detail += f"; {captured.blocks_replayed} repeated block(s) copied from a traced one"
    session.captured(captured)

    # Opsets below 18 are built at 18 and rewritten by the optimize stage (optimize/downgrade).
    build_opset = max(opts.opset_version, BUILD_OPSET)
    table = TranslationTable(
        ops.builtin_table(), opts.custom_translation_table, build_opset,
        fused_translations=opts.fusion != "none", onnxruntime_translations=opts.fusion == ONNXRUNTIME,
    )
    with progress.phase("decompose") as phase:
        decomposed = normalize.decompose(captured.exported_program, table)
        phase.detail = f"{len(decomposed.decomposed)} operator(s) decomposed" if decomposed.retraced else "not needed"
    session.decomposed(decomposed, table)
    program = decomposed.exported_program
    normalize.normalize(program, table, user_passes=opts.fx_passes or ())

    signature = ProgramSignature.of(program)
    translate.check_translatable(program, table)
    symbols = naming.symbol_names(signature, dim_names, opts.args, opts.kwargs)
    conditions = size_conditions(program, signature, symbols, one_size_per_symbol=captured.traced_from_examples)
    with progress.phase("translate") as phase:
        model_ir = translate.translate_program(
            program, table, opset_version=build_opset, symbol_names=symbols, signature=signature,
            state_outputs=opts.state_outputs, progress=progress.step,
        )
        phase.detail = f"{len(model_ir.graph)} ONNX nodes from {len(program.graph.nodes)} FX nodes"

    with progress.phase("optimize") as phase:
        fused = optimize_model(
            model_ir, opset_version=opts.opset_version, weights=signature.state_names, optimize=opts.optimize,
            fusion_mode=opts.fusion, extra_opsets=opts.extra_opsets, module_functions=opts.module_functions,
        )
        phase.detail = f"{len(model_ir.graph)} nodes" + ("" if opts.optimize else " (optimize=False)")
        if fused:
            phase.detail += "; fused " + ", ".join(f"{n} {name}" for name, n in fused.items())

    naming.name_interface(
        model_ir.graph, signature, input_names=opts.input_names, output_names=opts.output_names,
        dynamic_axes=opts.dynamic_axes, state_outputs=opts.state_outputs, call=(program, model, opts.args, opts.kwargs),
    )
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
    onnx_program.capture_blocks_replayed = captured.blocks_replayed
    onnx_program.verbose = opts.verbose is not False
    onnx_program.set_size_conditions(conditions, symbols)
    if conditions:
        warnings.warn(
            f"The exported graph is valid only for inputs where {'; '.join(onnx_program.size_conditions)}: torch.export "
            "decided on these sizes while it traced the model (a branch of the model's Python code on a size, a "
            "dynamic dim the model squeezes, taken never to be 1, or dims it found equal). program(...) refuses other inputs; "
            "ONNX Runtime used directly does not check them (they are in the model's metadata, "
            "'pkg.torch_onnx_fx.size_conditions').",
            UserWarning,
            stacklevel=3,
        )
    session.exported(onnx_program)
    return onnx_program
