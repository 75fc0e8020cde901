"""The translation table: which ONNX Script function translates which FX target.

Three layers, searched in order: the user's ``custom_translation_table``, torch_onnx_fx's own ops
(``torch_onnx_fx.ops``) and onnxscript's torchlib. The built-in layers are assembled once per
process where the translations live (``torch_onnx_fx.ops.builtin_table``) and handed to each
:class:`TranslationTable`, which layers an export's custom entries on top, so looking up a target
is a dict access. The translations import this module to register themselves; it imports none of
them.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Iterable, Mapping, Sequence

import onnx_ir as ir
import torch

from torch_onnx_fx.errors import UnsupportedArgumentError

__all__ = [
    "Deferred",
    "Translation",
    "TranslationTable",
    "target_key",
    "target_name",
    "registered_translations",
    "torchlib_limit",
    "register",
    "wants_context",
    "limit_torchlib",
    "arg_example",
    "arg_value",
    "integral_input",
    "float64_input",
    "float32_attribute",
    "has_complex_input",
    "needs_complex",
    "complex_translation",
    "OURS",
    "TORCHLIB",
]

CUSTOM = "custom"
OURS = "torch_onnx_fx"
TORCHLIB = "torchlib"


@dataclasses.dataclass(frozen=True)
class Deferred:
    """A translation function loaded when a node first needs it: torchlib's, whose import compiles
    its scripted functions (about 0.4 s of a process's first export), where most graphs use ours
    only. ``name`` is what errors show before it is loaded."""

    name: str
    load: Callable[[], Callable[..., Any]]


@dataclasses.dataclass(frozen=True)
class Translation:
    """One candidate translation of a target."""

    # The function, or a Deferred that loads it: read it through ``callable``.
    function: Callable[..., Any] | Deferred
    source: str
    complex: bool = False
    # The lowest ONNX opset the translation's body is valid for.
    min_opset: int = 1
    # Whether the translation handles this particular FX node (static sizes, a mode...). Nodes
    # it declines are decomposed by torch instead, so a translation can cover the common case
    # without failing on the rest.
    supports: Callable[[torch.fx.Node], bool] | None = None
    # Whether the translation is one ONNX operator computing the whole op (Attention): its
    # kernel then owns the precision of the intermediates, which normalize would otherwise
    # widen for half-precision inputs.
    fused: bool = False
    # Whether the translation is to one of ONNX Runtime's own operators (com.microsoft): chosen only
    # with fusion="onnxruntime", and then ahead of the standard translations of its target.
    onnxruntime: bool = False

    def accepts(self, node: torch.fx.Node | None) -> bool:
        return self.supports is None or node is None or bool(self.supports(node))

    @functools.cached_property
    def callable(self) -> Callable[..., Any]:
        """The function itself, loaded first if it is deferred."""
        return self.function.load() if isinstance(self.function, Deferred) else self.function

    @functools.cached_property
    def signature(self) -> ir.schemas.OpSignature | None:
        return getattr(self.callable, "op_signature", None)

    @property
    def name(self) -> str:
        if isinstance(self.function, Deferred):
            return self.function.name
        return getattr(self.function, "name", None) or getattr(self.function, "__name__", repr(self.function))


def target_key(target: Any) -> Any:
    """The key a target is stored under: qualified names for ATen-style ops, else the callable."""
    if isinstance(target, torch._ops.OpOverloadPacket):
        raise UnsupportedArgumentError(
            f"custom_translation_table key {target} is an OpOverloadPacket; use a specific "
            f"overload such as {target}.default."
        )
    if isinstance(target, torch._ops.OpOverload):
        return target.name()
    if isinstance(target, str):
        return target
    return target


def target_name(target: Any) -> str:
    """A target's name as errors and reports show it: ``aten::add.Tensor``, ``operator.mul``."""
    if isinstance(target, torch._ops.OpOverload):
        return target.name()
    module = getattr(target, "__module__", None)
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or str(target)
    return f"{module}.{name}" if module and module not in ("builtins",) else name


# Our own ops register here at import time of torch_onnx_fx.ops.
_OUR_OPS: dict[Any, list[Translation]] = {}


def arg_example(node: torch.fx.Node, index: int = 0) -> Any:
    """The FX example value (``meta["val"]``) of a node's positional argument, or None: what
    ``supports=`` predicates look at (static sizes, dtypes, ranks)."""
    arg = node.args[index] if len(node.args) > index else None
    return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None


def arg_value(node: torch.fx.Node, index: int, name: str, default: Any = None) -> Any:
    """A node's argument by schema position or keyword name, ``default`` when it is left out; a
    node argument is given as its example value. What ``supports=`` predicates read of scalar
    arguments (a dtype, a dim, a bound)."""
    value = node.args[index] if len(node.args) > index else node.kwargs.get(name, default)
    return value.meta.get("val") if isinstance(value, torch.fx.Node) else value


def integral_input(node: torch.fx.Node) -> bool:
    """Whether the node's first argument is an integer or bool tensor (a ``supports=`` predicate
    for translations, or refusals, of exact types)."""
    example = arg_example(node)
    return isinstance(example, torch.Tensor) and not example.dtype.is_floating_point and not example.is_complex()


def floating_input(node: torch.fx.Node) -> bool:
    """Whether the node's first argument is a real floating-point tensor."""
    example = arg_example(node)
    return isinstance(example, torch.Tensor) and example.dtype.is_floating_point


def float64_input(node: torch.fx.Node) -> bool:
    """Whether the node's first argument is a float64 tensor (translations, or refusals, for what
    ONNX Runtime has no float64 kernel for)."""
    example = arg_example(node)
    return isinstance(example, torch.Tensor) and example.dtype == torch.float64


def float32_attribute(position: int, name: str, default: float) -> Callable[[torch.fx.Node], bool]:
    """A ``supports=`` predicate for translations that pass a number of the node as an ONNX float
    attribute (a norm's ``epsilon``): true unless the node computes in float64 and the number is
    not a float32 number, which the attribute would round (eps=1e-5 became 9.99999974738e-06:
    a float64 layer norm of small values 1.1e-8 off)."""

    def accepts(node: torch.fx.Node) -> bool:
        value = arg_value(node, position, name, default)
        return not float64_input(node) or not isinstance(value, float) or float(torch.tensor(value, dtype=torch.float32)) == value

    return accepts


def floating_result(node: torch.fx.Node) -> bool:
    """Whether the node's result (its first, for several) is a real floating-point tensor: for
    translations of float-valued functions that also take integers."""
    result = node.meta.get("val")
    if isinstance(result, (tuple, list)):
        result = result[0] if result else None
    return isinstance(result, torch.Tensor) and result.dtype.is_floating_point


def half_result(node: torch.fx.Node) -> bool:
    """Whether the node's result is a float16 or bfloat16 tensor: for translations of what ATen
    computes another way in the half types (in float32 with roundings of its own)."""
    result = node.meta.get("val")
    return isinstance(result, torch.Tensor) and result.dtype in (torch.float16, torch.bfloat16)


def complex_translation(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a ``custom_translation_table`` function as the translation for complex inputs.

    It receives complex tensors in their real form (a trailing dim of 2: real, imaginary) and
    must return its complex results in that form. Unmarked functions are given real nodes only.
    """
    fn._torch_onnx_fx_complex = True  # type: ignore[attr-defined]
    return fn


def _is_complex_arg(arg: Any) -> bool:
    if isinstance(arg, torch.fx.Node):
        example = arg.meta.get("val")
        return isinstance(example, torch.Tensor) and example.is_complex()
    if isinstance(arg, (list, tuple)):
        return any(_is_complex_arg(a) for a in arg)
    return False


def has_complex_input(node: torch.fx.Node) -> bool:
    """Whether any tensor argument of ``node`` (lists included) is complex."""
    return any(_is_complex_arg(a) for a in node.args) or any(_is_complex_arg(a) for a in node.kwargs.values())


def _has_complex_output(node: torch.fx.Node) -> bool:
    values = node.meta.get("val")
    values = values if isinstance(values, (list, tuple)) else [values]
    return any(isinstance(v, torch.Tensor) and v.is_complex() for v in values)


# Operators whose real translations turn real inputs into the real view of a complex result
# (``view_as_complex`` is the identity on it); any other node with a complex result computes it.
_REAL_TO_COMPLEX = frozenset({
    "aten::view_as_complex", "aten::view_as_complex_copy", "aten::complex", "aten::polar",
    "aten::_fft_r2c", "aten::stft",
})


def needs_complex(node: torch.fx.Node) -> bool:
    """Whether ``node`` may only be given to a translation declaring complex support.

    Complex tensors travel as their real view (a trailing dim of 2), so a real translation given
    one computes on the view's numbers as if they were independent reals, and one asked for a
    complex result (``full(..., dtype=complex64)``, ``real * 1j``) does not make the view:
    either is silently wrong. torch.onnx's dispatcher has the same rule for inputs.
    """
    if has_complex_input(node):
        return True
    return _has_complex_output(node) and target_key(node.target) not in _REAL_TO_COMPLEX


def wants_context(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a translation that needs an :class:`~torch_onnx_fx.translate.op_context.OpContext`, passed as
    the ``ctx=`` keyword: the node's example values and schema names, and the builders for
    loops, subgraphs, initializers and nodes ONNX Script cannot write inline."""
    fn._torch_onnx_fx_wants_context = True  # type: ignore[attr-defined]
    return fn


def register(
    *targets: Any,
    complex: bool = False,
    min_opset: int = 1,
    supports: Callable[[torch.fx.Node], bool] | None = None,
    fused: bool = False,
    onnxruntime: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator registering a torch_onnx_fx translation for one or more targets.

    Targets are qualified ATen names (``"aten::sym_size.int"``) or Python callables that appear
    as FX targets (``operator.mul``). Registration order is dispatch preference.
    """

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        for target in targets:
            _OUR_OPS.setdefault(target_key(target), []).append(
                Translation(
                    fn, OURS, complex=complex, min_opset=min_opset, supports=supports, fused=fused, onnxruntime=onnxruntime,
                )
            )
        return fn

    return decorator


# Nodes torchlib's translation of an operator mishandles, declined so torch decomposes them:
# qualified name -> predicate that is True for the nodes torchlib does handle.
_TORCHLIB_LIMITS: dict[str, Callable[[torch.fx.Node], bool]] = {}


def limit_torchlib(target: str, supports: Callable[[torch.fx.Node], bool]) -> None:
    """Restrict torchlib's translations of ``target`` to the nodes ``supports`` accepts.

    For cases torchlib translates wrongly where torch's decomposition is right; the operator's
    own translations in torch_onnx_fx, if any, are unaffected.
    """
    _TORCHLIB_LIMITS[target_key(target)] = supports


def registered_translations() -> dict[Any, list[Translation]]:
    """What ``register`` has collected so far, by target key (read by the built-in table, which
    ``torch_onnx_fx.ops`` assembles after importing every family)."""
    return _OUR_OPS


def torchlib_limit(target: Any) -> Callable[[torch.fx.Node], bool] | None:
    """The ``limit_torchlib`` predicate of ``target``, if any."""
    return _TORCHLIB_LIMITS.get(target_key(target))


def _custom_entries(value: Any) -> list[Translation]:
    functions: Iterable[Any] = value if isinstance(value, (list, tuple)) else [value]
    result = []
    for fn in functions:
        if not callable(fn):
            raise UnsupportedArgumentError(
                f"custom_translation_table values must be ONNX Script functions or lists of them, "
                f"got {fn!r}."
            )
        is_complex = bool(getattr(fn, "_torch_onnx_fx_complex", False))
        result.append(Translation(fn, CUSTOM, complex=is_complex))
    return result


class TranslationTable:
    """The table one export dispatches through."""

    def __init__(
        self,
        builtin: Mapping[Any, Sequence[Translation]],
        custom: Mapping[Any, Any] | None = None,
        opset_version: int = 18,
        fused_translations: bool = True,
        onnxruntime_translations: bool = False,
    ):
        self.opset_version = opset_version
        # fusion="none": translations to one fused operator (Attention) are never chosen.
        self.fused_translations = fused_translations
        # fusion="onnxruntime": translations to ONNX Runtime's operators are chosen, first.
        self.onnxruntime_translations = onnxruntime_translations
        # The built-in translations (torch_onnx_fx.ops.builtin_table()): handed in, so the
        # registry never imports the translations that import it.
        self._builtin = builtin
        self._custom: dict[Any, list[Translation]] = {}
        for target, value in (custom or {}).items():
            if not (
                isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket, str))
                or callable(target)
            ):
                raise UnsupportedArgumentError(
                    f"custom_translation_table key {target!r} is not a torch operator or callable."
                )
            if isinstance(target, str) and "::" not in target:
                raise UnsupportedArgumentError(
                    f"custom_translation_table key {target!r} is not a qualified operator name; use the "
                    "operator (torch.ops.aten.relu.default) or its name with namespace ('aten::relu')."
                )
            self._custom[target_key(target)] = _custom_entries(value)

    @property
    def custom_targets(self) -> set[Any]:
        return set(self._custom)

    def candidates(self, target: Any, node: torch.fx.Node | None = None) -> list[Translation]:
        """Every usable translation for ``target`` (and ``node``, when given), in preference order."""
        usable = [
            t for t in self._registered(target)
            if t.min_opset <= self.opset_version and (self.fused_translations or not t.fused)
            and (self.onnxruntime_translations or not t.onnxruntime)
        ]
        usable.sort(key=lambda t: not t.onnxruntime)  # stable: registration order otherwise
        if node is None:
            return usable
        # The structural rule of complex support (as torch.onnx's dispatcher has it): a node with a
        # complex input goes only to complex translations, and a real node only to real ones. A
        # node left without a candidate is decomposed, or reported as untranslatable.
        is_complex = needs_complex(node)
        return [t for t in usable if t.complex == is_complex and t.accepts(node)]

    def fused(self, node: torch.fx.Node) -> bool:
        """Whether ``node`` will be translated to one ONNX operator computing the whole op."""
        if node.op != "call_function":
            return False
        chosen = self.candidates(node.target, node)
        return bool(chosen) and chosen[0].fused

    def declined_for_complex(self, target: Any, node: torch.fx.Node) -> bool:
        """Whether ``node`` has translations, but only real ones, and needs a complex one."""
        if not needs_complex(node):
            return False
        found = self._registered(target)
        return bool(found) and not any(t.complex for t in found)

    def _registered(self, target: Any) -> Sequence[Translation]:
        """Every translation registered for ``target``; a user entry replaces the built-in ones
        (they asked for their translation)."""
        try:
            key = target_key(target)
        except UnsupportedArgumentError:
            return ()
        return self._custom.get(key) or self._builtin.get(key, ())

    def has(self, target: Any, node: torch.fx.Node | None = None) -> bool:
        return bool(self.candidates(target, node))

    def source_of(self, target: Any) -> str | None:
        found = self.candidates(target)
        return found[0].source if found else None


def _fits(param: Any, arg: Any) -> bool:
    if not isinstance(param, ir.schemas.Parameter):
        # An attribute: a tensor there cannot fit.
        return not isinstance(arg, torch.Tensor)
    if isinstance(arg, torch.Tensor):
        dtype = ir.DataType.FLOAT if arg.is_complex() else _dtype(arg.dtype)
        allowed = param.type_constraint.allowed_types
        return any(getattr(t, "dtype", None) == dtype for t in allowed)
    return True


def _dtype(torch_dtype: torch.dtype) -> ir.DataType:
    from onnx_ir.tensor_adapters import from_torch_dtype

    return from_torch_dtype(torch_dtype)


def choose(
    candidates: Sequence[Translation], example_args: Sequence[Any], example_kwargs: Mapping[str, Any]
) -> Translation:
    """Pick the candidate whose signature accepts the inputs' dtypes; else the first.

    ``example_args``/``example_kwargs`` are the FX node's arguments with tensors replaced by
    their meta values, so dtypes and complexity are known.
    """
    pool = list(candidates)
    for candidate in pool:
        sig = candidate.signature
        if sig is None:
            return candidate
        params = list(sig.params)
        ok = all(_fits(p, a) for p, a in zip(params, example_args))
        ok = ok and all(_fits(sig.params_map[k], v) for k, v in example_kwargs.items() if k in sig.params_map)
        if ok:
            return candidate
    return pool[0]
