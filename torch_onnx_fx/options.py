"""Options: every argument of ``export`` declared once, and one call's arguments resolved.

``export`` takes ``torch.onnx.export``'s arguments, legacy ones included, and two of its own.
Each is a field of :class:`ExportOptions`, declared below with its default, its type as the
signature shows it, the check its value must pass before any work is done, and what it does. From
that one declaration come ``export``'s signature and the argument section of its docstring
(:func:`signature`, :func:`argument_docs`), the up-front type checks, and the table of
``docs/migration.md`` (``tools/pages/arguments.py``); adding an argument is adding a field.

:func:`resolve` decides what one call's arguments mean, before any work is done: an
``ExportableModule``'s own recipe, the TorchScript-era arguments (accepted with a
``DeprecationWarning`` where ignoring them changes nothing, refused where the user asked for
something this exporter does not do), the opset range, torch.onnx's rule that a ``dict`` ending
``args`` is the keyword arguments, and the conversion of legacy ``dynamic_axes`` to
``dynamic_shapes``. The stages read the resulting :class:`ExportOptions`.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import inspect
import io
import os
import warnings
from typing import Any, Callable, Collection, Mapping, Sequence

import onnx
import torch

from torch_onnx_fx.capture.dynamic_shapes import forward_signature, from_dynamic_axes
from torch_onnx_fx.errors import ArgumentTypeError, UnsupportedArgumentError
from torch_onnx_fx.optimize.fusion import DEFAULT_FUSION, FUSIONS
from torch_onnx_fx.translate.metadata import class_name

__all__ = [
    "ExportOptions", "resolve", "signature", "argument_docs", "arguments", "export_recipe", "UNSET", "LEGACY",
    "DEFAULT_OPSET", "TORCHLIB_OPSET", "MIN_OPSET", "max_opset",
]

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


def _short(value: Any) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= 60 else text[:57] + "..."


# -- the checks a value must pass before any work ----------------------------------------------------

Check = Callable[[str, Any], None]


def _instance(accepted: tuple[type, ...], description: str) -> Check:
    """A check that the value is one of ``accepted``: a typo fails in milliseconds, not after a
    capture, and a bool flag given a string is a mistake, not a truthy value."""

    def check(name: str, value: Any) -> None:
        if not isinstance(value, accepted):
            raise ArgumentTypeError(
                f"export(..., {name}=...): expected {description}, got {type(value).__name__} ({_short(value)})."
            )

    return check


# ints too: torch.onnx's TorchScript-era callers pass 0/1.
_FLAG = _instance((bool, int), "True or False")


def _module_classes(name: str, value: Any) -> None:
    """True, False or a collection of module classes (unset: the legacy argument left out)."""
    if value is UNSET or isinstance(value, bool):
        return
    if isinstance(value, Collection) and not isinstance(value, (str, bytes)) and all(
        isinstance(cls, type) and issubclass(cls, torch.nn.Module) for cls in value
    ):
        return
    raise ArgumentTypeError(
        f"export(..., {name}=...): expected True, False or a collection of torch.nn.Module subclasses, got {_short(value)}."
    )


def _names(name: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise ArgumentTypeError(
            f"export(..., {name}=...): expected a list of str (one name per graph {name.split('_')[0]}), got {_short(value)}."
        )


def _passes(name: str, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)) or not all(callable(v) for v in value):
        raise ArgumentTypeError(
            f"export(..., {name}=...): expected a list of functions taking a torch.fx.GraphModule, got {_short(value)}."
        )


# -- the declaration ---------------------------------------------------------------------------------

TORCH_ONNX, OURS, LEGACY_KIND, RESOLVED = "torch.onnx", "ours", "legacy", "resolved"


def _argument(default: Any, doc: str, *, check: Check | None = None, kind: str = TORCH_ONNX) -> Any:
    """One argument of ``export``: its default, what it does (a row of the migration table, in
    Markdown) and the check its value must pass; the field's type is the signature's."""
    return dataclasses.field(default=default, metadata={"doc": doc, "check": check, "kind": kind})


MODEL_DOC = (
    "`nn.Module`, `ExportedProgram` (used as is) or a plain callable. TorchScript modules raise "
    "`UnsupportedArgumentError`."
)
MODEL_ANNOTATION = "torch.nn.Module | torch.export.ExportedProgram | Callable[..., Any]"


@dataclasses.dataclass
class ExportOptions:
    """``export``'s arguments, declared once; after :func:`resolve`, one call's, normalised."""

    args: tuple[Any, ...] | Any = _argument(
        (), "Example inputs; a single tensor is accepted. Non-tensor arguments are baked into the model. Without "
        "`kwargs`, a `dict` ending `args` is the keyword arguments (`(x, {\"b\": y})` calls `model(x, b=y)`), as in "
        "torch.onnx; end `args` with `{}` to pass a dict positionally.",
    )
    f: str | os.PathLike[str] | None = _argument(
        None, "When given, the model is also saved there (honouring `external_data`, `export_params`, "
        "`keep_initializers_as_inputs`).",
        check=_instance((str, os.PathLike, io.IOBase, type(None)), "a file path (str or os.PathLike), a binary file object or None"),
    )
    kwargs: Mapping[str, Any] | None = _argument(
        None, "Example keyword inputs, as `args`.",
        check=_instance((Mapping, type(None)), "a dict of keyword arguments or None"),
    )
    verbose: bool | None = _argument(
        None, "`None`: one progress line per phase on stderr. `False`: silent. `True`: progress, then the model is printed.",
        check=_instance((bool, type(None)), "True, False or None"),
    )
    input_names: Sequence[str] | None = _argument(
        None, "Rename graph inputs in order. They name the *flattened* tensor inputs (nested lists, tuples and dicts "
        "included). As in the TorchScript exporter, `input_names` longer than the user inputs go on to name "
        "parameters and buffers in order; `apply_weights` still accepts their state-dict names.",
        check=_names,
    )
    output_names: Sequence[str] | None = _argument(
        None, "Rename graph outputs in order. Naming an output that is an input passed through adds an `Identity`, so "
        "the input keeps its name.",
        check=_names,
    )
    opset_version: int | None = _argument(
        None, f"`None` means {DEFAULT_OPSET}. {MIN_OPSET} to the newest opset the installed `onnx` defines; anything else "
        "raises before any work. Below 18 the graph is built at 18 and each operator that changed is rewritten to "
        "its older form (see below); an operator with no older form raises a `TranslationError` naming it and the "
        "opset it needs. At 23 and later, `scaled_dot_product_attention` is one `Attention` node.",
    )
    dynamo: bool = _argument(True, "`False` raises: only the torch.export path exists.", check=_FLAG)
    external_data: bool = _argument(True, "With `f`: weights to `<f>.data`.", check=_FLAG)
    dynamic_shapes: Mapping[str, Any] | tuple[Any, ...] | list[Any] | None = _argument(
        None, "Every form torch.export accepts; strings name ONNX dims (see [dynamic shapes](dynamic_shapes.md)). "
        "Captured as torch.onnx captures: dims of size 0 or 1 in the example stay symbolic, deferrable shape checks "
        "become run-time asserts, and `Dim` ranges torch.export rejects with suggested fixes are refined by those "
        "fixes, with a `UserWarning` (the fixes are in `ONNXProgram.capture_refinements`). Two names for dims "
        "torch.export proves equal warn, keeping the first.",
        check=_instance((Mapping, tuple, list, type(None)), "a dict, tuple or list of dynamic shapes (as torch.export.export takes), or None"),
    )
    custom_translation_table: Mapping[Any, Any] | None = _argument(
        None, "`{OpOverload or callable: function or [functions]}`; an `OpOverloadPacket` key raises naming the "
        "overload to use.",
        check=_instance((Mapping, type(None)), "a dict mapping operators to translation functions, or None"),
    )
    report: bool = _argument(False, "A Markdown report of the export. See [diagnostics](diagnostics.md).", check=_FLAG)
    optimize: bool = _argument(
        True, "`True`: onnxscript's optimizer. `False`: only function inlining and dead-code removal.", check=_FLAG,
    )
    fusion: str = _argument(
        DEFAULT_FUSION, "`\"standard\"` (default): the ONNX standard's fused operators where the opset has them (opset 23: "
        "`Attention`, `RMSNormalization`, `RotaryEmbedding`); `\"none\"`: never; `\"onnxruntime\"`: the standard's "
        "and ONNX Runtime's `GroupQueryAttention`, `SkipSimplifiedLayerNormalization`, `RotaryEmbedding` and `MatMulNBits` for 4-bit weights "
        "([quantization](quantization.md)), each where it computes what the model does. See [fused operators](fusion.md).",
        kind=OURS,
    )
    verify: bool = _argument(
        False, "Run the model in ONNX Runtime and compare with eager. See [diagnostics](diagnostics.md).", check=_FLAG,
    )
    profile: bool = _argument(False, "Profile the export. See [diagnostics](diagnostics.md).", check=_FLAG)
    dump_exported_program: bool = _argument(
        False, "Write the `ExportedProgram`. See [diagnostics](diagnostics.md).", check=_FLAG,
    )
    artifacts_dir: str | os.PathLike[str] = _argument(
        ".", "Where `report`, `profile` and `dump_exported_program` write (created if missing). See "
        "[diagnostics](diagnostics.md).",
        check=_instance((str, os.PathLike), "a folder path"),
    )
    export_params: bool = _argument(
        True, "With `f`: `False` saves no weights. Without `f`: a warning (use `ONNXProgram.save`).", check=_FLAG,
    )
    keep_initializers_as_inputs: bool = _argument(
        False, "With `f`: weights also listed as inputs. Without `f`: a warning.", check=_FLAG,
    )
    dynamic_axes: Mapping[str, Mapping[int, str]] | Mapping[str, Sequence[int]] | None = _argument(
        None, "Converted to `dynamic_shapes` with torch.onnx's `DeprecationWarning` and `UserWarning`. Keys are "
        "`input_names` entries (flattened inputs), argument names, or output names (these rename output dims); a "
        "key that is none of them takes the next unnamed input, with a warning. Dict form keeps the axis names; "
        "list form names axes `<name>_dynamic_axes_<i>`. Cannot be combined with `dynamic_shapes`.",
        check=_instance((Mapping, type(None)), "a dict mapping input/output names to their dynamic axes, or None"),
    )
    state_outputs: bool = _argument(
        False, "`False` (default): the graph's outputs are the model's outputs, in order, `None` left out — as "
        "torch.onnx's. `True`: the new values of mutated buffers, parameters and inputs follow them (their "
        "`OutputSpec.kind` metadata says which is which), for callers that carry state (KV caches, running "
        "statistics) themselves.",
        check=_FLAG, kind=OURS,
    )
    fx_passes: Sequence[Callable[[torch.fx.GraphModule], Any]] | None = _argument(
        None, "Your own FX passes: functions called in order with the captured program's `GraphModule` after "
        "decomposition, before the graph is normalized and translated; each may edit the graph in place "
        "(recompiled after each). The supported form of what transformers' exporter patches into torch.onnx's "
        "private `_prepare_exported_program_for_export`.",
        check=_passes, kind=OURS,
    )
    training: Any = _argument(
        UNSET, "`TrainingMode.TRAINING` raises (set `model.train()` yourself); other values warn (deprecated).",
        kind=LEGACY_KIND,
    )
    operator_export_type: Any = _argument(
        UNSET, "Anything but `ONNX` raises; `ONNX` warns (deprecated).", kind=LEGACY_KIND,
    )
    do_constant_folding: Any = _argument(
        UNSET, "Warns (deprecated): folding is part of `optimize`.", kind=LEGACY_KIND,
    )
    custom_opsets: Mapping[str, int] | None = _argument(
        UNSET, "Warns (deprecated) and sets those domain versions on the model.",
        kind=LEGACY_KIND,
    )
    export_modules_as_functions: bool | Collection[type[torch.nn.Module]] = _argument(
        UNSET,
        "torch.onnx ignores it with `dynamo=True`; here each module instance becomes a call of an ONNX function, one function per "
        "distinct body (class, configuration, input signature), weights left as the main graph's "
        "initializers. `True`: the repeated blocks (instances of one class side by side in a `ModuleList` "
        "or `Sequential`, such as a transformer's decoder layers); a collection of module classes: their "
        "instances, nested where they nest. `False` (default): one flat graph. With functions, capture traces "
        "each distinct block once and copies its trace for the instances provably equal to it, so a deep model "
        "exports faster than `torch.export` alone captures it. See [functions](functions.md).",
        check=_module_classes, kind=LEGACY_KIND,
    )
    autograd_inlining: Any = _argument(UNSET, "Warns (deprecated).", kind=LEGACY_KIND)
    # What resolve() derives; not an argument.
    extra_opsets: dict[str, int] = dataclasses.field(default_factory=dict, metadata={"kind": RESOLVED})
    # False, True (the repeated blocks) or the qualified names of the classes to make functions of.
    module_functions: bool | frozenset[str] = dataclasses.field(default=False, metadata={"kind": RESOLVED})

    @property
    def diagnostics(self) -> dict[str, Any]:
        return dict(
            report=self.report, verify=self.verify, profile=self.profile,
            dump_exported_program=self.dump_exported_program, artifacts_dir=self.artifacts_dir,
        )


def arguments() -> list[dataclasses.Field[Any]]:
    """The declared arguments, in signature order."""
    return [field for field in dataclasses.fields(ExportOptions) if field.metadata.get("kind") != RESOLVED]


LEGACY = tuple(field.name for field in arguments() if field.metadata["kind"] == LEGACY_KIND)
_ARGUMENT_NAMES = frozenset(field.name for field in arguments())
_POSITIONAL = ("args", "f")


def signature(return_annotation: str = "ONNXProgram") -> inspect.Signature:
    """``export``'s signature: ``model``, then every declared argument (``args`` and ``f``
    positional too, the rest keyword-only, as torch.onnx.export's)."""
    parameters = [inspect.Parameter("model", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=MODEL_ANNOTATION)]
    for field in arguments():
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD if field.name in _POSITIONAL else inspect.Parameter.KEYWORD_ONLY
        parameters.append(inspect.Parameter(field.name, kind, default=field.default, annotation=field.type))
    return inspect.Signature(parameters, return_annotation=return_annotation)


def argument_docs() -> str:
    """The argument section of ``export``'s docstring, from the declaration."""
    lines = ["Arguments:", f"    model: {MODEL_DOC}"]
    for field in arguments():
        origin = {OURS: " (torch_onnx_fx only)", LEGACY_KIND: " (legacy)"}.get(field.metadata["kind"], "")
        lines.append(f"    {field.name}{origin}: {field.metadata['doc']}")
    return "\n".join(lines)


def _check_types(given: ExportOptions) -> None:
    """Each argument's declared check, in declaration order, before any work."""
    for field in arguments():
        check = field.metadata["check"]
        if check is not None:
            check(field.name, getattr(given, field.name))


def _unknown_argument(name: str) -> ArgumentTypeError:
    known = [field.name for field in arguments()]
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; it takes {', '.join(known)}."
    return ArgumentTypeError(f"export() got an unexpected keyword argument {name!r}{hint}")


def _module_functions(value: Any) -> bool | frozenset[str]:
    """``export_modules_as_functions`` (checked by ``_module_classes``) as the optimize stage
    takes it: a flag or the classes' names as node metadata has them."""
    if value is UNSET or isinstance(value, bool):
        return value is True
    return frozenset(class_name(cls) for cls in value)


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


def _check_fusion(fusion: Any) -> None:
    if fusion not in FUSIONS:
        raise UnsupportedArgumentError(
            f"export(..., fusion={fusion!r}): expected one of {', '.join(map(repr, FUSIONS))} (the default "
            f"{DEFAULT_FUSION!r} uses the ONNX standard's fused operators where the opset has them; see docs/fusion.md)."
        )


def _check_call(model: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any], dynamic_shapes: Any, args_was_list: bool = False) -> None:
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
    bound = signature.bind(*args, **kwargs).arguments
    _check_values(bound)
    if args_was_list:
        _check_list_args(signature, bound)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    if isinstance(dynamic_shapes, Mapping) and not takes_any:
        unknown = [key for key in dynamic_shapes if key not in parameters]
        if unknown:
            raise UnsupportedArgumentError(
                f"export(..., dynamic_shapes=...): keys {unknown} are not arguments of the model's "
                f"forward({', '.join(parameters)}); a dict of dynamic shapes is keyed by argument name."
            )


_TENSOR_ANNOTATIONS = (torch.Tensor, "Tensor", "torch.Tensor")


def _check_values(bound: Mapping[str, Any]) -> None:
    """A numpy array anywhere, named before a capture attempt: torch.export takes tensors only."""
    import numpy as np

    for name, value in bound.items():
        try:
            leaves = torch.utils._pytree.tree_flatten_with_path(value)[0]
        except ValueError:  # a registered type without keys: the argument's name only
            leaves = [((), leaf) for leaf in torch.utils._pytree.tree_leaves(value)]
        for path, leaf in leaves:
            if isinstance(leaf, np.ndarray):
                where = name + torch.utils._pytree.keystr(path)
                raise UnsupportedArgumentError(
                    f"export(model, args, kwargs=...): argument {where} is a numpy array; torch.export "
                    f"takes tensors: pass torch.from_numpy(...) (dtype {leaf.dtype}, shape {list(leaf.shape)})."
                )


def _check_list_args(signature: inspect.Signature, bound: Mapping[str, Any]) -> None:
    """``export(m, [x])`` passes the list as the forward's one argument, as torch.onnx does; where
    that parameter is annotated ``Tensor`` the list was meant as the arguments, and the capture
    would fail in both strategies: named here instead."""
    for name, value in bound.items():
        parameter = signature.parameters[name]
        if parameter.annotation in _TENSOR_ANNOTATIONS and isinstance(value, list):
            raise UnsupportedArgumentError(
                f"export(model, args=[...]): a list is one argument (as torch.onnx takes it), but the model's "
                f"forward takes a Tensor as {name!r}: pass the positional arguments as a tuple, "
                "export(model, (x, ...))."
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


def resolve(model: Any, args: Any, f: Any, given_arguments: Mapping[str, Any]) -> ExportOptions:
    """Normalise ``export``'s arguments; raise :class:`UnsupportedArgumentError` for bad ones."""
    for name in given_arguments:
        if name not in _ARGUMENT_NAMES:
            raise _unknown_argument(name)
    given = ExportOptions(args=args, f=f, **given_arguments)
    _check_types(given)
    # What an exportable module's recipe or the resolution may change; the rest is read from given.
    kwargs, dynamic_shapes, input_names, output_names = given.kwargs, given.dynamic_shapes, given.input_names, given.output_names
    dynamic_axes = given.dynamic_axes
    if given.report or given.profile or given.dump_exported_program:
        try:
            os.makedirs(given.artifacts_dir, exist_ok=True)
        except OSError as exc:
            raise UnsupportedArgumentError(
                f"export(..., artifacts_dir={os.fspath(given.artifacts_dir)!r}): cannot create the folder for the "
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
    if not given.dynamo:
        raise UnsupportedArgumentError(
            "dynamo=False (the TorchScript exporter) is not implemented by torch_onnx_fx; only the "
            "torch.export path is. Remove dynamo=False, or call torch.onnx.export for TorchScript."
        )
    extra_opsets = _legacy_arguments({name: getattr(given, name) for name in LEGACY})
    opset = _opset(given.opset_version)
    _check_fusion(given.fusion)
    if dynamic_shapes is not None and dynamic_axes is not None:
        raise UnsupportedArgumentError("Pass either dynamic_shapes or the legacy dynamic_axes, not both.")
    if given.f is None and (not given.export_params or given.keep_initializers_as_inputs):
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
    args_was_list = isinstance(args, list)
    if not isinstance(args, tuple):
        args = (args,)
    is_program = isinstance(model, torch.export.ExportedProgram)
    if not is_program:
        args, kwargs = _split_trailing_kwargs(args, kwargs)
    kwargs = dict(kwargs or {})
    if not is_program:
        _check_call(model, args, kwargs, dynamic_shapes, args_was_list)
    if is_program and dynamic_axes is not None:
        raise UnsupportedArgumentError("dynamic_axes cannot be applied to an ExportedProgram; its shapes are fixed.")
    if is_program and dynamic_shapes is not None:
        raise UnsupportedArgumentError("dynamic_shapes cannot be applied to an ExportedProgram; pass them to torch.export.export.")
    if dynamic_axes is not None:
        dynamic_shapes = from_dynamic_axes(model, args, kwargs, dynamic_axes, input_names, output_names)
    return dataclasses.replace(
        given,
        args=args,
        kwargs=kwargs,
        opset_version=opset,
        dynamic_shapes=dynamic_shapes,
        input_names=input_names,
        output_names=output_names,
        state_outputs=bool(given.state_outputs),
        extra_opsets=extra_opsets,
        module_functions=_module_functions(given.export_modules_as_functions),
    )

