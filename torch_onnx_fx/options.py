"""Options: the arguments of one ``export`` call, normalised once into a record.

``export`` takes ``torch.onnx.export``'s arguments, legacy ones included. Everything that decides
what they mean lives here, before any work is done: an ``ExportableModule``'s own recipe, the
TorchScript-era arguments (accepted with a ``DeprecationWarning`` where ignoring them changes
nothing, refused where the user asked for something this exporter does not do), the opset range,
torch.onnx's rule that a ``dict`` ending ``args`` is the keyword arguments, and the conversion of
legacy ``dynamic_axes`` to ``dynamic_shapes``. The stages read the resulting :class:`ExportOptions`.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import io
import logging
import os
import warnings
from typing import Any, Mapping, Sequence

import onnx
import torch

from torch_onnx_fx.capture.dynamic_shapes import forward_signature, from_dynamic_axes
from torch_onnx_fx.optimize.fusion import DEFAULT_FUSION, FUSIONS
from torch_onnx_fx.errors import ArgumentTypeError, UnsupportedArgumentError

__all__ = ["ExportOptions", "resolve", "export_recipe", "UNSET", "DEFAULT_OPSET", "TORCHLIB_OPSET", "MIN_OPSET", "max_opset"]

logger = logging.getLogger(__name__)

# The opset used when ``opset_version`` is None: the newest one ONNX Runtime and the major
# back ends have supported for long, the same default as torch.onnx.
DEFAULT_OPSET = 20
# torchlib's translations are written for opset 18; graphs are built directly at the requested
# opset (see the tracer's opset adapters for what changed before and after it).
TORCHLIB_OPSET = 18
# The oldest opset a graph can be produced at: below 18 it is built at 18 and rewritten
# (torch_onnx_fx.optimize.downgrade); 13 is the oldest with the axes-as-input forms most operators use.
MIN_OPSET = 13


def max_opset() -> int:
    """The newest opset the installed ``onnx`` defines."""
    return onnx.defs.onnx_opset_version()


class _Default(enum.Enum):
    """Marks legacy arguments the caller did not pass, to warn only on explicit use."""

    UNSET = 0


UNSET = _Default.UNSET


@dataclasses.dataclass
class ExportOptions:
    """One export call, normalised: what the stages read."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    opset_version: int
    dynamic_shapes: Any
    dynamic_axes: Mapping[str, Any] | None
    input_names: Sequence[str] | None
    output_names: Sequence[str] | None
    custom_translation_table: Mapping[Any, Any] | None
    optimize: bool
    fusion: str
    state_outputs: bool
    extra_opsets: dict[str, int]
    verbose: bool | None
    # Where and how to save, when ``f`` was given.
    f: str | os.PathLike[str] | None
    external_data: bool
    export_params: bool
    keep_initializers_as_inputs: bool
    # Artifacts and checks (see diagnostics).
    report: bool
    verify: bool
    profile: bool
    dump_exported_program: bool
    artifacts_dir: str | os.PathLike[str]

    @property
    def diagnostics(self) -> dict[str, Any]:
        return dict(
            report=self.report, verify=self.verify, profile=self.profile,
            dump_exported_program=self.dump_exported_program, artifacts_dir=self.artifacts_dir,
        )


def _legacy_arguments(legacy: Mapping[str, Any]) -> dict[str, int]:
    """Validate the TorchScript-era arguments; return custom opsets to import."""

    def deprecated(name: str, why: str) -> None:
        warnings.warn(f"'{name}' is deprecated and has no effect with torch_onnx_fx: {why}", DeprecationWarning, stacklevel=5)

    training = legacy.get("training", UNSET)
    if training is not UNSET:
        mode = getattr(training, "name", None)
        if mode not in ("EVAL", "PRESERVE", "TRAINING"):
            raise ArgumentTypeError(
                f"export(..., training=...): expected a torch.onnx.TrainingMode, got {_short(training)}; "
                "better, leave it out and put the model in the mode to export (model.eval())."
            )
        if mode == "TRAINING":
            raise UnsupportedArgumentError(
                "training=TrainingMode.TRAINING is not supported: put the model in the mode you "
                "want to export (model.train() or model.eval()) before calling export."
            )
        deprecated("training", "the model is exported in the mode it is in; call model.eval() first.")
    operator_export_type = legacy.get("operator_export_type", UNSET)
    if operator_export_type is not UNSET:
        if not isinstance(getattr(operator_export_type, "name", None), str):
            raise ArgumentTypeError(
                f"export(..., operator_export_type=...): expected a torch.onnx.OperatorExportTypes, got "
                f"{_short(operator_export_type)}; better, leave it out (only ONNX operators are produced)."
            )
        if operator_export_type.name != "ONNX":
            raise UnsupportedArgumentError(
                f"operator_export_type={operator_export_type} is not supported: only standard ONNX "
                "operators (OperatorExportTypes.ONNX) are produced."
            )
        deprecated("operator_export_type", "only ONNX operators are produced.")
    for flag in ("do_constant_folding", "autograd_inlining"):
        if legacy.get(flag, UNSET) is not UNSET and not isinstance(legacy[flag], (bool, int)):
            raise ArgumentTypeError(f"export(..., {flag}=...): expected True or False, got {_short(legacy[flag])}.")
    if legacy.get("do_constant_folding", UNSET) is not UNSET:
        deprecated("do_constant_folding", "constant folding is part of optimize=True; pass optimize=False to skip it.")
    as_functions = legacy.get("export_modules_as_functions", UNSET)
    if as_functions is not UNSET:
        if as_functions:
            raise UnsupportedArgumentError(
                "export_modules_as_functions is not supported by the torch.export-based exporter; "
                "module structure is kept in node metadata (namespace, name scopes) instead."
            )
        deprecated("export_modules_as_functions", "modules are recorded in node metadata.")
    if legacy.get("autograd_inlining", UNSET) is not UNSET:
        deprecated("autograd_inlining", "torch.export always inlines autograd functions.")
    custom_opsets = legacy.get("custom_opsets", UNSET)
    opsets: dict[str, int] = {}
    if custom_opsets is not UNSET and custom_opsets is not None:
        if not isinstance(custom_opsets, Mapping):
            raise ArgumentTypeError(f"export(..., custom_opsets=...): expected a dict of domain -> version, got {_short(custom_opsets)}.")
        deprecated("custom_opsets", "custom domains are imported at the versions their translations declare; the given versions are applied on top.")
        for domain, version in dict(custom_opsets).items():
            if not isinstance(domain, str) or not isinstance(version, int):
                raise UnsupportedArgumentError(f"custom_opsets must map domain names to int versions, got {custom_opsets!r}.")
            opsets[domain] = version
    return opsets


def _opset(opset_version: Any) -> int:
    if opset_version is None:
        return DEFAULT_OPSET
    newest = max_opset()
    if isinstance(opset_version, bool) or not isinstance(opset_version, int):
        raise ArgumentTypeError(
            f"export(..., opset_version=...): expected an int from {MIN_OPSET} to {newest} or None, got "
            f"{type(opset_version).__name__} ({_short(opset_version)})."
        )
    if not MIN_OPSET <= opset_version <= newest:
        raise UnsupportedArgumentError(
            f"opset_version={opset_version!r} is not supported: torch_onnx_fx builds opsets "
            f"{MIN_OPSET} to {newest} (the newest the installed onnx defines; default {DEFAULT_OPSET})."
        )
    return opset_version


def _short(value: Any) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= 60 else text[:57] + "..."


def _expect(name: str, value: Any, accepted: tuple[type, ...], description: str) -> None:
    if isinstance(value, accepted):
        return
    raise ArgumentTypeError(f"export(..., {name}=...): expected {description}, got {type(value).__name__} ({_short(value)}).")


def _names(name: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise ArgumentTypeError(
            f"export(..., {name}=...): expected a list of str (one name per graph {name.split('_')[0]}), got {_short(value)}."
        )


def _check_types(arguments: Mapping[str, Any]) -> None:
    """Each argument's type, checked before any work so a typo fails in milliseconds, not after a
    capture: a bool flag given a string is a mistake, not a truthy value."""
    flags = ("dynamo", "external_data", "report", "optimize", "verify", "profile", "dump_exported_program",
             "export_params", "keep_initializers_as_inputs", "state_outputs")
    for flag in flags:
        # ints too: torch.onnx's TorchScript-era callers pass 0/1.
        _expect(flag, arguments[flag], (bool, int), "True or False")
    _expect("verbose", arguments["verbose"], (bool, type(None)), "True, False or None")
    _expect("kwargs", arguments["kwargs"], (Mapping, type(None)), "a dict of keyword arguments or None")
    _expect("f", arguments["f"], (str, os.PathLike, io.IOBase, type(None)), "a file path (str or os.PathLike), a binary file object or None")
    _expect("artifacts_dir", arguments["artifacts_dir"], (str, os.PathLike), "a folder path")
    _expect("custom_translation_table", arguments["custom_translation_table"], (Mapping, type(None)),
            "a dict mapping operators to translation functions, or None")
    _expect("dynamic_axes", arguments["dynamic_axes"], (Mapping, type(None)),
            "a dict mapping input/output names to their dynamic axes, or None")
    _expect("dynamic_shapes", arguments["dynamic_shapes"], (Mapping, tuple, list, type(None)),
            "a dict, tuple or list of dynamic shapes (as torch.export.export takes), or None")
    _names("input_names", arguments["input_names"])
    _names("output_names", arguments["output_names"])


def _check_fusion(fusion: Any) -> None:
    if fusion not in FUSIONS:
        raise UnsupportedArgumentError(
            f"export(..., fusion={fusion!r}): expected one of {', '.join(map(repr, FUSIONS))} (the default "
            f"{DEFAULT_FUSION!r} uses the ONNX standard's fused operators where the opset has them; see docs/fusion.md)."
        )


def _check_call(model: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any], dynamic_shapes: Any) -> None:
    """The model can be called with ``args``/``kwargs``, and a dict of ``dynamic_shapes`` names its
    parameters: a wrong call is named here, not after a capture attempt by every strategy."""
    signature = forward_signature(model)
    if signature is None:
        return
    parameters = signature.parameters
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        names = ", ".join(parameters)
        raise UnsupportedArgumentError(
            f"export(model, args, kwargs=...): the model's forward({names}) cannot be called with "
            f"{len(args)} positional argument(s) and keyword argument(s) {sorted(kwargs)}: {exc}. Pass args as a "
            "tuple of the forward's positional arguments and kwargs as a dict of the rest."
        ) from None
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    if isinstance(dynamic_shapes, Mapping) and not takes_any:
        unknown = [key for key in dynamic_shapes if key not in parameters]
        if unknown:
            raise UnsupportedArgumentError(
                f"export(..., dynamic_shapes=...): keys {unknown} are not arguments of the model's "
                f"forward({', '.join(parameters)}); a dict of dynamic shapes is keyed by argument name."
            )


def export_recipe(model: Any) -> dict[str, Any] | None:
    """The export defaults an exportable module declares, or None for other models.

    Recognised by its methods, as torch.onnx does, so a ``torch.onnx.ExportableModule`` and a
    ``torch_onnx_fx.ExportableModule`` (which has them all) are read alike.
    """
    is_exportable = (
        isinstance(model, torch.nn.Module)
        and type(model).__name__ != "ExportedProgram"
        and all(callable(getattr(model, name, None)) for name in ("example_arguments", "to_onnx"))
    )
    if not is_exportable:
        return None
    args, kwargs = model.example_arguments()
    return {
        "args": tuple(args),
        "kwargs": dict(kwargs or {}),
        "dynamic_shapes": model.dynamic_shapes(),
        "input_names": model.input_names(),
        "output_names": model.output_names(),
    }


def _split_trailing_kwargs(args: tuple[Any, ...], kwargs: Mapping[str, Any] | None) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """torch.onnx's (and the TorchScript exporter's) rule: without ``kwargs``, a dict that ends
    ``args`` holds the keyword arguments: ``export(m, (x, {"b": y}))`` calls ``m(x, b=y)``."""
    if not kwargs and args and isinstance(args[-1], dict):
        return args[:-1], dict(args[-1])
    return args, dict(kwargs or {})


def resolve(
    model: Any,
    args: Any,
    *,
    kwargs: Mapping[str, Any] | None,
    f: str | os.PathLike[str] | None,
    verbose: bool | None,
    input_names: Sequence[str] | None,
    output_names: Sequence[str] | None,
    opset_version: int | None,
    dynamo: bool,
    external_data: bool,
    dynamic_shapes: Any,
    custom_translation_table: Mapping[Any, Any] | None,
    report: bool,
    optimize: bool,
    verify: bool,
    profile: bool,
    dump_exported_program: bool,
    artifacts_dir: str | os.PathLike[str],
    export_params: bool,
    keep_initializers_as_inputs: bool,
    dynamic_axes: Mapping[str, Any] | None,
    state_outputs: bool,
    legacy: Mapping[str, Any],
    fusion: str = DEFAULT_FUSION,
) -> ExportOptions:
    """Normalise ``export``'s arguments; raise :class:`UnsupportedArgumentError` for bad ones."""
    _check_types(dict(
        kwargs=kwargs, f=f, verbose=verbose, input_names=input_names, output_names=output_names, dynamo=dynamo,
        external_data=external_data, dynamic_shapes=dynamic_shapes, custom_translation_table=custom_translation_table,
        report=report, optimize=optimize, verify=verify, profile=profile, dump_exported_program=dump_exported_program,
        artifacts_dir=artifacts_dir, export_params=export_params, keep_initializers_as_inputs=keep_initializers_as_inputs,
        dynamic_axes=dynamic_axes, state_outputs=state_outputs,
    ))
    if report or profile or dump_exported_program:
        try:
            os.makedirs(artifacts_dir, exist_ok=True)
        except OSError as exc:
            raise UnsupportedArgumentError(
                f"export(..., artifacts_dir={os.fspath(artifacts_dir)!r}): cannot create the folder for the "
                f"report/profile/program files ({exc.strerror}); pass a writable folder."
            ) from exc
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
    extra_opsets = _legacy_arguments(legacy)
    opset = _opset(opset_version)
    _check_fusion(fusion)
    if dynamic_shapes is not None and dynamic_axes is not None:
        raise UnsupportedArgumentError("Pass either dynamic_shapes or the legacy dynamic_axes, not both.")
    if f is None and (not export_params or keep_initializers_as_inputs):
        warnings.warn(
            "export_params and keep_initializers_as_inputs only apply when f is given; use "
            "ONNXProgram.save(include_initializers=..., keep_initializers_as_inputs=...) instead.",
            stacklevel=3,
        )
    if isinstance(model, torch.nn.Module) and model.training:
        # torch.onnx's warning, word for word: users' filters match it.
        warnings.warn(
            "Exporting a model while it is in training mode. Please ensure that this is intended, as it "
            "may lead to different behavior during inference. Calling model.eval() before export is recommended.",
            UserWarning,
            stacklevel=3,
        )
    if not isinstance(args, tuple):
        args = (args,)
    is_program = isinstance(model, torch.export.ExportedProgram)
    if not is_program:
        args, kwargs = _split_trailing_kwargs(args, kwargs)
    kwargs = dict(kwargs or {})
    if not is_program:
        _check_call(model, args, kwargs, dynamic_shapes)
    if is_program and dynamic_axes is not None:
        raise UnsupportedArgumentError("dynamic_axes cannot be applied to an ExportedProgram; its shapes are fixed.")
    if is_program and dynamic_shapes is not None:
        raise UnsupportedArgumentError("dynamic_shapes cannot be applied to an ExportedProgram; pass them to torch.export.export.")
    if dynamic_axes is not None:
        dynamic_shapes = from_dynamic_axes(model, args, kwargs, dynamic_axes, input_names, output_names)
    return ExportOptions(
        args=args,
        kwargs=kwargs,
        opset_version=opset,
        dynamic_shapes=dynamic_shapes,
        dynamic_axes=dynamic_axes,
        input_names=input_names,
        output_names=output_names,
        custom_translation_table=custom_translation_table,
        optimize=optimize,
        fusion=fusion,
        state_outputs=bool(state_outputs),
        extra_opsets=extra_opsets,
        verbose=verbose,
        f=f,
        external_data=external_data,
        export_params=export_params,
        keep_initializers_as_inputs=keep_initializers_as_inputs,
        report=report,
        verify=verify,
        profile=profile,
        dump_exported_program=dump_exported_program,
        artifacts_dir=artifacts_dir,
    )
