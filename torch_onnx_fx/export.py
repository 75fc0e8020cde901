"""``export``: the public entry, composing capture → decompose → translate → annotate → optimize.

The signature is ``torch.onnx.export``'s, legacy arguments included, so replacing the call is a
one-word change. Arguments that only made sense for the TorchScript exporter are accepted with a
``DeprecationWarning`` where ignoring them changes nothing, and rejected with a clear error where
the user asked for something this exporter does not do.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import time
import warnings
from typing import Any, Callable, Collection, Iterator, Mapping, Sequence

import onnx_ir as ir
import torch

from torch_onnx_fx import annotate, capture, decompose, optimize as optimize_stage, translate
from torch_onnx_fx import _state
from torch_onnx_fx.dynamic_shapes import flatten_user_inputs, from_dynamic_axes, prepare_dynamic_shapes
from torch_onnx_fx.errors import UnsupportedArgumentError
from torch_onnx_fx.exportable import export_recipe
from torch_onnx_fx.program import ONNXProgram
from torch_onnx_fx.progress import Progress
from torch_onnx_fx.registry import TranslationTable

__all__ = ["export", "DEFAULT_OPSET", "TORCHLIB_OPSET"]

logger = logging.getLogger(__name__)

# The opset used when ``opset_version`` is None: the newest one ONNX Runtime and the major
# back ends have supported for long, the same default as torch.onnx.
DEFAULT_OPSET = 20
# torchlib's translations are written for opset 18, the oldest opset we build. Graphs are built
# directly at the requested opset: torchlib's opset-18 ops keep their meaning in later opsets, and
# our own translations use newer operators (Gelu, GroupNormalization…) where the opset has them.
TORCHLIB_OPSET = 18


class _Default(enum.Enum):
    """Marks legacy arguments the caller did not pass, to warn only on explicit use."""

    UNSET = 0


_UNSET = _Default.UNSET


def _legacy_arguments(
    training: Any,
    operator_export_type: Any,
    do_constant_folding: Any,
    custom_opsets: Any,
    export_modules_as_functions: Any,
    autograd_inlining: Any,
) -> dict[str, int]:
    """Validate the TorchScript-era arguments; return custom opsets to import."""

    def deprecated(name: str, why: str) -> None:
        warnings.warn(f"'{name}' is deprecated and has no effect with torch_onnx_fx: {why}", DeprecationWarning, stacklevel=4)

    if training is not _UNSET:
        mode = getattr(training, "name", str(training))
        if mode == "TRAINING":
            raise UnsupportedArgumentError(
                "training=TrainingMode.TRAINING is not supported: put the model in the mode you "
                "want to export (model.train() or model.eval()) before calling export."
            )
        deprecated("training", "the model is exported in the mode it is in; call model.eval() first.")
    if operator_export_type is not _UNSET:
        if getattr(operator_export_type, "name", "ONNX") != "ONNX":
            raise UnsupportedArgumentError(
                f"operator_export_type={operator_export_type} is not supported: only standard ONNX "
                "operators (OperatorExportTypes.ONNX) are produced."
            )
        deprecated("operator_export_type", "only ONNX operators are produced.")
    if do_constant_folding is not _UNSET:
        deprecated("do_constant_folding", "constant folding is part of optimize=True; pass optimize=False to skip it.")
    if export_modules_as_functions is not _UNSET:
        if export_modules_as_functions:
            raise UnsupportedArgumentError(
                "export_modules_as_functions is not supported by the torch.export-based exporter; "
                "module structure is kept in node metadata (namespace, name scopes) instead."
            )
        deprecated("export_modules_as_functions", "modules are recorded in node metadata.")
    if autograd_inlining is not _UNSET:
        deprecated("autograd_inlining", "torch.export always inlines autograd functions.")
    opsets: dict[str, int] = {}
    if custom_opsets is not _UNSET and custom_opsets is not None:
        deprecated("custom_opsets", "custom domains are imported at the versions their translations declare; the given versions are applied on top.")
        for domain, version in dict(custom_opsets).items():
            if not isinstance(domain, str) or not isinstance(version, int):
                raise UnsupportedArgumentError(f"custom_opsets must map domain names to int versions, got {custom_opsets!r}.")
            opsets[domain] = version
    return opsets


def _rename(values: Sequence[ir.Value], names: Sequence[str] | None, kind: str, taken: set[str]) -> None:
    if not names:
        return
    if len(names) > len(values):
        raise UnsupportedArgumentError(
            f"{len(names)} {kind}_names were given but the model has {len(values)} {kind}s "
            f"({[v.name for v in values]})."
        )
    if len(set(names)) != len(names):
        raise UnsupportedArgumentError(f"{kind}_names must be unique, got {list(names)}.")
    for value, name in zip(values, names):
        if value.name == name:
            continue
        if name in taken:
            raise UnsupportedArgumentError(f"{kind} name {name!r} is already used by another value in the graph.")
        value.metadata_props[annotate.ORIGINAL_NAME_KEY] = value.name or ""
        value.name = name


def _rename_inputs(
    graph: ir.Graph, names: Sequence[str] | None, program: torch.export.ExportedProgram, taken: set[str]
) -> None:
    """Name user inputs, then (legacy TorchScript semantics) parameters and buffers in order."""
    if not names:
        return
    user_inputs = list(graph.inputs)
    _rename(user_inputs, names[: len(user_inputs)], "input", taken)
    extra = list(names[len(user_inputs):])
    if not extra:
        return
    lifted = [
        graph.initializers[spec.target]
        for spec in program.graph_signature.input_specs
        if spec.kind.name in ("PARAMETER", "BUFFER") and spec.target in graph.initializers
    ]
    if len(extra) > len(lifted):
        raise UnsupportedArgumentError(
            f"{len(names)} input_names were given but the model has {len(user_inputs)} inputs and "
            f"{len(lifted)} parameters/buffers to name."
        )
    _rename(lifted[: len(extra)], extra, "input", taken - {v.name for v in lifted})


def _apply_output_axes(graph: ir.Graph, dynamic_axes: Mapping[str, Any], input_names: Sequence[str]) -> None:
    """Give output dims the names the legacy ``dynamic_axes`` asked for."""
    outputs = {v.name: v for v in graph.outputs}
    for key, axes in dynamic_axes.items():
        value = outputs.get(key)
        if value is None or value.shape is None:
            if key not in outputs and key not in input_names:
                logger.debug("dynamic_axes key %s matches no input or output", key)
            continue
        # List form: automatic names, as torch.onnx writes them (``sum_dynamic_axes_1``).
        named = axes.items() if isinstance(axes, Mapping) else ((a, f"{key}_dynamic_axes_{i + 1}") for i, a in enumerate(axes))
        dims = list(value.shape)
        for axis, name in named:
            axis = int(axis)
            if not -len(dims) <= axis < len(dims):
                raise UnsupportedArgumentError(f"dynamic_axes[{key!r}]: axis {axis} out of range for rank {len(dims)}.")
            if isinstance(dims[axis], int):
                warnings.warn(
                    f"dynamic_axes[{key!r}] marks axis {axis} dynamic but the exported model computes "
                    f"a static size {dims[axis]} there; it is left static.",
                    stacklevel=3,
                )
                continue
            if name is not None:
                dims[axis] = str(name)
        value.shape = ir.Shape(dims)


def _symbol_names(program: torch.export.ExportedProgram, names: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, str]:
    """Map torch.export's symbols to the names the user gave their dims."""
    if not names.by_tensor:
        return {}
    flat = flatten_user_inputs(program, args, kwargs)
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    user_inputs = [s for s in program.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    mapping: dict[str, str] = {}
    for spec, example in zip(user_inputs, flat):
        axes = names.by_tensor.get(id(example)) if isinstance(example, torch.Tensor) else None
        node = placeholders.get(getattr(spec.arg, "name", None))
        if not axes or node is None:
            continue
        val = node.meta.get("val")
        for axis, name in axes.items():
            size = val.shape[axis] if isinstance(val, torch.Tensor) and axis < val.dim() else None
            if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                symbol = size.node.expr.name
                if mapping.setdefault(symbol, name) != name:
                    logger.info("dim %s is named both %s and %s; keeping %s", symbol, mapping[symbol], name, mapping[symbol])
    return mapping


@contextlib.contextmanager
def _in_export() -> Iterator[None]:
    previous = _state.IN_ONNX_EXPORT
    _state.IN_ONNX_EXPORT = True
    try:
        yield
    finally:
        _state.IN_ONNX_EXPORT = previous


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
    verify: bool = False,
    profile: bool = False,
    dump_exported_program: bool = False,
    artifacts_dir: str | os.PathLike[str] = ".",
    export_params: bool = True,
    keep_initializers_as_inputs: bool = False,
    dynamic_axes: Mapping[str, Mapping[int, str]] | Mapping[str, Sequence[int]] | None = None,
    training: Any = _UNSET,
    operator_export_type: Any = _UNSET,
    do_constant_folding: Any = _UNSET,
    custom_opsets: Mapping[str, int] | None | Any = _UNSET,
    export_modules_as_functions: bool | Collection[type[torch.nn.Module]] | Any = _UNSET,
    autograd_inlining: Any = _UNSET,
) -> ONNXProgram:
    """Export ``model`` to ONNX through torch.export; a drop-in for ``torch.onnx.export(dynamo=True)``.

    Returns an :class:`ONNXProgram`. When ``f`` is given the model is also saved there, honouring
    ``external_data``, ``export_params`` and ``keep_initializers_as_inputs``.
    """
    recipe = export_recipe(model)
    if recipe is not None:
        # An ExportableModule's own recipe fills whatever the call leaves out.
        if args == () and not kwargs:
            args, kwargs = recipe["args"], recipe["kwargs"]
        if dynamic_shapes is None and dynamic_axes is None:
            dynamic_shapes = recipe["dynamic_shapes"]
        input_names = input_names if input_names is not None else recipe["input_names"]
        output_names = output_names if output_names is not None else recipe["output_names"]
    if not dynamo:
        raise UnsupportedArgumentError(
            "dynamo=False (the TorchScript exporter) is not implemented by torch_onnx_fx; only the "
            "torch.export path is. Remove dynamo=False, or call torch.onnx.export for TorchScript."
        )
    extra_opsets = _legacy_arguments(
        training, operator_export_type, do_constant_folding, custom_opsets, export_modules_as_functions, autograd_inlining
    )
    if opset_version is None:
        opset_version = DEFAULT_OPSET
    if not isinstance(opset_version, int) or opset_version < TORCHLIB_OPSET:
        raise UnsupportedArgumentError(
            f"opset_version={opset_version!r} is not supported: torch_onnx_fx produces opset "
            f"{TORCHLIB_OPSET} or newer (default {DEFAULT_OPSET})."
        )
    if dynamic_shapes is not None and dynamic_axes is not None:
        raise UnsupportedArgumentError("Pass either dynamic_shapes or the legacy dynamic_axes, not both.")
    if f is None and (not export_params or keep_initializers_as_inputs):
        warnings.warn(
            "export_params and keep_initializers_as_inputs only apply when f is given; use "
            "ONNXProgram.save(include_initializers=..., keep_initializers_as_inputs=...) instead.",
            stacklevel=2,
        )
    if not isinstance(args, tuple):
        args = (args,)
    kwargs = dict(kwargs or {})
    progress = Progress(enabled=verbose is not False)
    options = dict(
        report=report, verify=verify, profile=profile, dump_exported_program=dump_exported_program,
        artifacts_dir=artifacts_dir,
    )
    from torch_onnx_fx import diagnostics

    with _in_export(), diagnostics.session(model, args, kwargs, progress, **options) as session:
        if dynamic_axes is not None:
            if isinstance(model, torch.export.ExportedProgram):
                raise UnsupportedArgumentError("dynamic_axes cannot be applied to an ExportedProgram; its shapes are fixed.")
            dynamic_shapes = from_dynamic_axes(model, args, kwargs, dynamic_axes, input_names)
        if isinstance(model, torch.export.ExportedProgram) and dynamic_shapes is not None:
            raise UnsupportedArgumentError("dynamic_shapes cannot be applied to an ExportedProgram; pass them to torch.export.export.")
        prepared_shapes, dim_names = prepare_dynamic_shapes(model, args, kwargs, dynamic_shapes) if not isinstance(model, torch.export.ExportedProgram) else (None, None)

        with progress.phase("capture") as phase:
            captured = capture.capture(model, args, kwargs, prepared_shapes)
            phase.detail = captured.strategy
        session.captured(captured)
        table = TranslationTable(custom_translation_table, opset_version)

        with progress.phase("decompose") as phase:
            decomposed = decompose.decompose(captured.exported_program, table)
            phase.detail = f"{len(decomposed.decomposed)} operator(s) decomposed" if decomposed.retraced else "not needed"
        program = decomposed.exported_program
        session.decomposed(decomposed, table)

        missing = translate.untranslatable_targets(program.graph_module, table)
        if missing:
            raise translate.missing_translation_error(missing)
        symbol_names = _symbol_names(program, dim_names, args, kwargs) if dim_names is not None else {}

        with progress.phase("translate") as phase:
            graph, tracer = translate.translate(
                program, table, opset_version=opset_version, symbol_names=symbol_names, progress=progress.step
            )
            phase.detail = f"{len(graph)} ONNX nodes from {len(program.graph.nodes)} FX nodes"
        annotate.annotate_graph(graph, program)
        model_ir = ir.Model(
            graph,
            ir_version=10,
            producer_name="torch_onnx_fx",
            producer_version=_state.version(),
            functions=list(tracer.functions.values()),
        )

        with progress.phase("optimize") as phase:
            optimize_stage.finalize(model_ir)
            if optimize:
                optimize_stage.optimize(model_ir)
            phase.detail = f"{len(model_ir.graph)} nodes" + ("" if optimize else " (optimize=False)")
        graph.opset_imports.update(extra_opsets)

        taken = {v.name for n in graph for v in n.outputs} | set(graph.initializers)
        _rename_inputs(graph, input_names, program, taken)
        _rename(graph.outputs, output_names, "output", taken)
        if dynamic_axes is not None:
            _apply_output_axes(graph, dynamic_axes, input_names or [])

        onnx_program = ONNXProgram(
            model_ir,
            program,
            capture_strategy=captured.strategy,
            capture_failures=captured.failures,
            decomposed=decomposed.decomposed,
        )
        onnx_program.verbose = verbose is not False
        session.exported(onnx_program)
        if verify:
            with progress.phase("verify") as phase:
                phase.detail = session.verify(onnx_program)
        if f is not None:
            with progress.phase("save") as phase:
                onnx_program.save(
                    f,
                    include_initializers=export_params,
                    keep_initializers_as_inputs=keep_initializers_as_inputs,
                    external_data=external_data,
                )
                phase.detail = os.fspath(f)
        if verbose:
            print(onnx_program.model)
    return onnx_program


