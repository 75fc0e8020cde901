"""The sizes a captured program is valid for, beyond the ones its graph computes with.

A model's Python code may branch on a size (``if x.shape[-1] % 4: pad``, ``if n > 8: ...``).
torch.export follows the branch the example takes and records what that decision assumed about
the dims: as ranges of their symbols (``length <= 8``), as run-time asserts left in the graph
(``length % 4 == 0``), or as guards of the program (an ``ExportedProgram`` made with automatic
dims). The ONNX graph computes only the branch that was taken; at sizes that break the
assumption it fails in ONNX Runtime, or — where the branch changed values, not shapes — returns
wrong numbers. :func:`size_conditions` collects those assumptions as conditions on the graph
inputs' dims, so that export can say which sizes the graph is valid for and ``ONNXProgram``
can refuse a call outside them.

Not every recorded assumption is a condition of the model: torch.export assumes dynamic dims
(and the sizes derived from them) are at least 2, and relations that only fail below that are left
out, as torch.onnx ignores them (dims of size 0 or 1 run through the same graph), except where the
model squeezes a dynamic dim: the graph keeps it, eager drops it at 1. Equalities between two dims
are left out too: torch.onnx runs calls that break them when the operators broadcast (a batch of 1
beside one of 5), except in a program traced from its example sizes, where torch.export merges
dims through derived sizes (``one_size_per_symbol``). Conditions implied by the others are dropped, and only those that amount to a
bound, a range or a multiple of one dim are kept (``length <= 64``, ``8 <= length <= 11``,
``length % 4 == 0``): other relations torch records are about sizes derived from the dims,
where a refusal could be wrong.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any, Iterable, Mapping, Sequence

import sympy
import torch
import torch.utils._pytree as pytree

from torch_onnx_fx.signature import ProgramSignature

__all__ = ["SizeCondition", "SizeConditions", "size_conditions"]

logger = logging.getLogger(__name__)

# Sizes tried per dim when telling a model's condition from an assumption torch.export makes of
# every dynamic dim: a condition fails somewhere in this range, an assumption about sizes 0 and 1
# never does.
_SAMPLED_SIZES = range(2, 130)


_PYTHON = {"__builtins__": {}, "max": max, "min": min, "abs": abs}


def _python(expression: Any) -> str | None:
    """Python source of a sympy condition over integer sizes (torch's own Mod, FloorDiv, Min and
    Max included); None for anything else (rationals, unknown functions)."""
    if isinstance(expression, (sympy.logic.boolalg.BooleanTrue, sympy.logic.boolalg.BooleanFalse)):
        return str(bool(expression))
    if expression.is_Integer:
        return str(int(expression))
    if expression.is_Symbol:
        return expression.name
    name = type(expression).__name__
    parts = [_python(a) for a in expression.args]
    if any(part is None for part in parts):
        return None
    if name in _RELATIONS:
        return f"({parts[0]} {_RELATIONS[name]} {parts[1]})"
    operators = {"Mod": "%", "PythonMod": "%", "FloorDiv": "//", "CleanDiv": "//", "Add": "+", "Mul": "*", "And": "and", "Or": "or"}
    if name in operators:
        return "(" + f" {operators[name]} ".join(parts) + ")"
    if name in ("Min", "Max"):
        return f"{name.lower()}({', '.join(parts)})"
    if name == "Not":
        return f"(not {parts[0]})"
    if name == "Pow" and expression.args[1].is_Integer and int(expression.args[1]) >= 0:
        return f"({parts[0]} ** {parts[1]})"
    return None


_COMPILED: dict[Any, Any] = {}


def _compiled(expression: Any) -> Any:
    """The condition as compiled Python (sympy substitution costs 100x more), cached."""
    if expression not in _COMPILED:
        source = expression if isinstance(expression, str) else _python(expression)
        _COMPILED[expression] = compile(source, "<size condition>", "eval") if source is not None else None
    return _COMPILED[expression]


@dataclasses.dataclass(frozen=True)
class SizeCondition:
    """One condition on symbolic dims: a sympy relation, or a guard's Python expression over
    the symbols' names."""

    expression: Any
    symbols: tuple[str, ...]
    source: str
    # What the condition amounts to, in the dim's name, where it is a bound or a multiple.
    summary: str | None = None

    def holds(self, sizes: Mapping[str, int]) -> bool:
        code = _compiled(self.expression)
        if code is not None:
            return bool(eval(code, _PYTHON, dict(sizes)))  # noqa: S307 - torch's own conditions, made Python here
        known = {symbol: sympy.Integer(sizes[symbol.name]) for symbol in self.expression.free_symbols}
        return bool(self.expression.xreplace(known))

    def describe(self, names: Mapping[str, str]) -> str:
        """The condition with each symbol called by ``names`` (the graph's dim names)."""
        if self.summary is not None:
            return self.summary
        return _named(self.expression if isinstance(self.expression, str) else _readable(self.expression), self.symbols, names)


def _named(text: str, symbols: Iterable[str], names: Mapping[str, str]) -> str:
    """``text`` with each of ``symbols`` called by ``names`` (longest first: ``s1`` never renames
    part of ``s12``)."""
    for symbol in sorted(symbols, key=len, reverse=True):
        text = re.sub(rf"\b{re.escape(symbol)}\b", names.get(symbol, symbol), text)
    return text


_RELATIONS = {
    "LessThan": "<=", "StrictLessThan": "<", "GreaterThan": ">=", "StrictGreaterThan": ">", "Equality": "==", "Unequality": "!=",
}


def _readable(expression: Any) -> str:
    """Python-like text of a sympy condition (torch's own Mod and FloorDiv included)."""
    name = type(expression).__name__
    args = expression.args
    if name in _RELATIONS:
        return f"{_readable(args[0])} {_RELATIONS[name]} {_readable(args[1])}"
    if name in ("Mod", "PythonMod"):
        return f"({_readable(args[0])} % {_readable(args[1])})"
    if name in ("FloorDiv", "CleanDiv"):
        return f"({_readable(args[0])} // {_readable(args[1])})"
    if name == "Add":
        text = " + ".join(_readable(a) for a in args)
        return "(" + text.replace("+ -1*", "- ").replace("+ -", "- ") + ")"
    if name == "Mul":
        return "*".join(_readable(a) for a in args)
    if name in ("And", "Or"):
        return f" {name.lower()} ".join(f"({_readable(a)})" for a in args)
    if name == "Not":
        return f"not ({_readable(args[0])})"
    return str(expression)


@dataclasses.dataclass(frozen=True)
class SizeConditions:
    """Conditions on the graph inputs' dims, and where each symbol is found among the inputs."""

    conditions: tuple[SizeCondition, ...] = ()
    # (graph input position, dim, symbol name) for every symbolic dim of the graph inputs.
    dims: tuple[tuple[int, int, str], ...] = ()
    # What to call the symbols made for dims checked as one with another (``input.shape[d]``).
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def label(self, symbol: str, names: Mapping[str, str]) -> str:
        return self.labels.get(symbol) or names.get(symbol, symbol)

    def __bool__(self) -> bool:
        return bool(self.conditions)

    def sizes_of(self, feeds: Sequence[Any]) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for position, dim, symbol in self.dims:
            value = feeds[position] if position < len(feeds) else None
            shape = getattr(value, "shape", None)
            if shape is not None and dim < len(shape):
                sizes.setdefault(symbol, int(shape[dim]))
        return sizes

    def broken(self, feeds: Sequence[Any]) -> list[SizeCondition]:
        """The conditions the graph inputs ``feeds`` break (none can be checked without their sizes)."""
        sizes = self.sizes_of(feeds)
        return [c for c in self.conditions if set(c.symbols) <= set(sizes) and not c.holds(sizes)]


def _input_dims(signature: ProgramSignature) -> tuple[tuple[int, int, str], ...]:
    found = []
    for position, (node, _) in enumerate(signature.tensor_inputs):
        example = node.meta.get("val")
        for dim, size in enumerate(getattr(example, "shape", ())):
            if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
                found.append((position, dim, size.node.expr.name))
    return tuple(found)


def _deferred_asserts(program: torch.export.ExportedProgram) -> list[SizeCondition]:
    found = []
    for module in program.graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.op != "call_function" or node.target is not torch.ops.aten._assert_scalar.default:
                continue
            condition = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
            if isinstance(condition, torch.SymBool):
                expression = condition.node.expr
                found.append(SizeCondition(expression, tuple(sorted(s.name for s in expression.free_symbols)), "assert"))
    return found


def _unwritten_asserts(program: torch.export.ExportedProgram) -> list[SizeCondition]:
    """The deferred asserts of the program's shape environment, those the graph holds and those
    it does not: torch.export drops without a word an assert it cannot write as graph code
    (float arithmetic: ``int(n * 0.7) == 2`` from ``x[: int(x.shape[0] * 0.7)]``, or an
    attention ``scale=n ** -0.5``), and the dim stays dynamic with the example's decision built
    in (2 rows at n = 12 for eager's 8; torch.onnx ships it too)."""
    for node in program.graph.nodes:
        sizes = getattr(node.meta.get("val"), "shape", ()) if node.op == "placeholder" else ()
        symbolic = next((size for size in sizes if isinstance(size, torch.SymInt)), None)
        if symbolic is not None:
            environment = symbolic.node.shape_env
            break
    else:
        return []
    found = []
    for asserts in environment.deferred_runtime_asserts.values():
        for recorded in asserts:
            expression = recorded.expr
            found.append(SizeCondition(expression, tuple(sorted(s.name for s in expression.free_symbols)), "assert"))
    # And the guards: a decomposition run after capture (on an ExportedProgram passed in, whose
    # guards code predates it) records its branch decisions only there, adaptive pooling's
    # 7 % (width % 7) == 0 among them.
    for guard in environment.guards:
        expression = guard.expr
        if isinstance(expression, sympy.Basic) and expression.free_symbols:
            found.append(SizeCondition(expression, tuple(sorted(s.name for s in expression.free_symbols)), "guard"))
    return found


def _ranges(program: torch.export.ExportedProgram, symbols: set[str]) -> list[SizeCondition]:
    found = []
    for symbol, bounds in program.range_constraints.items():
        if not isinstance(symbol, sympy.Symbol) or symbol.name not in symbols:
            continue
        # torch's own infinity (int_oo) says it is finite; only integers are bounds.
        upper, lower = bounds.upper, bounds.lower
        if upper.is_Integer:
            found.append(SizeCondition(sympy.Le(symbol, upper), (symbol.name,), "range"))
        if lower.is_Integer and int(lower) > 2:
            found.append(SizeCondition(sympy.Ge(symbol, lower), (symbol.name,), "range"))
    return found


_SQUEEZES = frozenset({
    torch.ops.aten.squeeze.dim, torch.ops.aten.squeeze.dims, torch.ops.aten.squeeze_copy.dim, torch.ops.aten.squeeze_copy.dims,
})


def _squeezed_dims(program: torch.export.ExportedProgram) -> list[SizeCondition]:
    """Dynamic dims the model squeezes (``x.squeeze(0)`` of a dynamic batch). torch.export assumes
    such a dim is not 1 without recording it, and the graph keeps it; eager drops it when it is 1,
    so a batch of one got a result with a dim more than eager's. torch.onnx squeezes it instead,
    and fails at every other size. A size at which the dim is 1 is refused."""
    found = []
    for module in program.graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.op != "call_function" or node.target not in _SQUEEZES or not isinstance(node.args[0], torch.fx.Node):
                continue
            shape = getattr(node.args[0].meta.get("val"), "shape", ())
            dims = node.args[1] if isinstance(node.args[1], (list, tuple)) else [node.args[1]]
            for dim in dims if shape else ():
                size = shape[dim % len(shape)]
                if not isinstance(size, torch.SymInt) or len(size.node.expr.free_symbols) != 1:
                    continue
                expression = sympy.Ne(size.node.expr, 1)
                # sympy decides some at once (an even size is never 1): no condition.
                if expression.free_symbols:
                    found.append(SizeCondition(expression, (next(iter(expression.free_symbols)).name,), "squeeze"))
    return found


def _unit_size(condition: SizeCondition, members: Sequence[str], name: str) -> str | None:
    """A squeezed dim's condition as the sizes it rules out (``batch != 1``, ``length not in (2,
    3)`` for ``length // 2``); None when the dim is never 1 (``2 * length``)."""
    ruled_out = [n for n in range(0, 1026) if not _holds(condition, dict.fromkeys(members, n))]
    if not ruled_out:
        return None
    if len(ruled_out) == 1:
        return f"{name} != {ruled_out[0]}"
    if len(ruled_out) <= 8:  # a size derived from the dim: length // 2 is 1 at 2 and 3
        return f"{name} not in {tuple(ruled_out)}"
    return _named(_readable(condition.expression), condition.symbols[:1], {condition.symbols[0]: name})


_SIZE_OF = re.compile(r"(L(?:\[[^\]]+\])+)\.size\(\)\[(\d+)\]")


def _add_varargs(locals_: dict[str, Any]) -> None:
    """``forward(*tensors)``: torch.export names the arguments tensors_0, tensors_1, ... while its
    guards read them as L['tensors'][0]; both spellings then find the input."""
    packed: dict[str, dict[int, Any]] = {}
    for name, value in locals_.items():
        base, _, index = name.rpartition("_")
        if base and index.isdigit() and base not in locals_:
            packed.setdefault(base, {})[int(index)] = value
    for base, items in packed.items():
        if sorted(items) == list(range(len(items))):
            locals_[base] = [items[i] for i in range(len(items))]


def _guards(program: torch.export.ExportedProgram, signature: ProgramSignature) -> list[SizeCondition]:
    """The program's guards over input sizes, as Python over the symbols (torch keeps them for
    the module ``ExportedProgram.module()`` makes; an ExportedProgram from automatic dims has
    its branch decisions there)."""
    code = getattr(program, "_guards_code", None) or []
    if not code or signature.in_spec is None:
        return []
    try:
        names = list(program.module_call_graph[0].signature.forward_arg_names)
        args, kwargs = pytree.tree_unflatten(list(range(signature.in_spec.num_leaves)), signature.in_spec)
    except Exception:  # noqa: BLE001 - no names to read the guards with
        return []
    locals_ = {**dict(zip(names, args)), **kwargs}
    _add_varargs(locals_)
    examples = [node.meta.get("val") for node, _ in signature.user_inputs]
    found = []
    for guard in code:
        symbols: list[str] = []

        def size(match: re.Match[str]) -> str:
            index = eval(match.group(1), {"__builtins__": {}}, {"L": locals_})  # noqa: S307 - a path into the inputs
            value = examples[index].shape[int(match.group(2))]
            if isinstance(value, torch.SymInt) and isinstance(value.node.expr, sympy.Symbol):
                symbols.append(value.node.expr.name)
                return value.node.expr.name
            return str(int(value))

        try:
            expression = _SIZE_OF.sub(size, guard)
        except Exception:  # noqa: BLE001 - a guard on something else than an input's size
            continue
        if "L[" in expression or not symbols:
            continue
        found.append(SizeCondition(expression, tuple(sorted(set(symbols))), "guard"))
    return found


# torch.export assumes every size it can see is at least 2 (0 and 1 specialize); on sizes derived
# from the dims (length // 4 after a reshape) that assumption becomes a relation with 0 or 1.
_SMALL_SIZE_ASSUMPTION = re.compile(r"(!=\s*[01]|>=\s*2|>\s*1)\s*\)?\s*$")


def _assumes_no_small_sizes(condition: SizeCondition) -> bool:
    if isinstance(condition.expression, str):
        return bool(_SMALL_SIZE_ASSUMPTION.search(condition.expression))
    expression = condition.expression
    if any(type(part).__name__ in ("Mod", "PythonMod") for part in sympy.preorder_traversal(expression)):
        # A remainder's relation with 0 is a branch on the size (adaptive pooling's
        # 5 % (height % 5) != 0 picks its windows), not the no-small-sizes assumption.
        return False
    name = type(expression).__name__
    bound = {"Unequality": (0, 1), "GreaterThan": (2,), "StrictGreaterThan": (1,)}.get(name)
    if bound is not None and expression.args[1].is_Integer and int(expression.args[1]) in bound:
        return True
    # The same written the other way round: 1 < int(0.5 * width), from a scale_factor of 0.5.
    mirrored = {"Unequality": (0, 1), "LessThan": (2,), "StrictLessThan": (1,)}.get(name)
    return mirrored is not None and expression.args[0].is_Integer and int(expression.args[0]) in mirrored


def _holds(condition: SizeCondition, sizes: Mapping[str, int]) -> bool:
    try:
        return condition.holds(sizes)
    except Exception:  # noqa: BLE001 - undefined at these sizes (a division by zero): not a violation
        return True


def _holds_strictly(condition: SizeCondition, sizes: Mapping[str, int]) -> bool:
    """Whether a call at ``sizes`` meets the condition: undefined there (a division by zero) is not."""
    try:
        return condition.holds(sizes)
    except Exception:  # noqa: BLE001 - torch's own check raises there too
        return False


def _implied(condition: SizeCondition, others: Sequence[SizeCondition], samples: Sequence[Mapping[str, int]]) -> bool:
    # Sizes where another condition is undefined do not meet it (``length % 7 != 0`` is implied
    # by ``7 % (length % 7) == 0``, undefined at multiples of 7).
    return all(_holds(condition, p) for p in samples if all(_holds_strictly(o, p) for o in others))


def _essential(conditions: Sequence[SizeCondition], groups: Mapping[str, Sequence[str]]) -> list[SizeCondition]:
    """The conditions that decide something: not true at every sampled size (an assumption
    about sizes 0 and 1 only), and not implied by the others (the last of equivalent ones go
    first, so the first formulation torch recorded is the one kept)."""
    group_of = {symbol: name for name, members in groups.items() for symbol in members}

    def group(condition: SizeCondition) -> str:
        return group_of[condition.symbols[0]]

    # Each condition is on one dim: every size of that dim in the range, not random points of
    # all dims (with narrow ranges on other dims, no random point met them all, and a condition
    # passed as implied).
    samples = {name: [dict.fromkeys(members, n) for n in _SAMPLED_SIZES] for name, members in groups.items()}
    kept = [c for c in conditions if not all(_holds(c, p) for p in samples[group(c)])]
    for condition in reversed(list(kept)):
        others = [o for o in kept if o is not condition and group(o) == group(condition)]
        if others and _implied(condition, others, samples[group(condition)]):
            kept.remove(condition)
    return kept


def _summary(condition: SizeCondition, members: Sequence[str], name: str) -> str | None:
    """A condition on one dim as the bound, range or multiple it amounts to (``length <= 64`` for
    ``(length == Min(64, length)) or (Min(64, length) == 1)``); None when it is none of those."""
    sizes = range(2, 1026)
    truth = [_holds(condition, dict.fromkeys(members, n)) for n in sizes]
    if all(truth) or not any(truth):
        return None
    runs = [i for i in range(len(truth)) if truth[i] and (i == 0 or not truth[i - 1])]
    if len(runs) == 1:
        start = runs[0]
        end = truth.index(False, start) if False in truth[start:] else len(truth)
        if start == 0:
            return f"{name} <= {sizes[end - 1]}"
        if end == len(truth):
            return f"{name} >= {sizes[start]}"
        if end == start + 1:
            return f"{name} == {sizes[start]}"
        return f"{sizes[start]} <= {name} <= {sizes[end - 1]}"
    residues = _residues(condition, members)
    if residues is None:
        return None
    period, kept = residues
    if len(kept) == 1:
        return f"{name} % {period} == {kept[0]}"
    if len(kept) == period - 1:
        return f"{name} % {period} != {next(r for r in range(period) if r not in kept)}"
    return f"{name} % {period} in {kept}"


def _residues(condition: SizeCondition, members: Sequence[str]) -> tuple[int, tuple[int, ...]] | None:
    """The smallest period and the residues modulo it at which a condition on one dim holds, if
    it is periodic in that dim: adaptive pooling's ``7 % (width % 7) == 0`` holds for widths of
    residue 1 (at residue 0 it is undefined, which torch's own check of it raises on: not held)."""
    sizes = range(2, 1026)
    truth = [_holds_strictly(condition, dict.fromkeys(members, n)) for n in sizes]
    for period in range(2, 65):
        kept = {n % period for n, t in zip(sizes, truth) if t}
        if all(t == (n % period in kept) for n, t in zip(sizes, truth)):
            return period, tuple(sorted(kept))
    return None


def _as_residues(condition: SizeCondition, members: Sequence[str]) -> SizeCondition:
    """A periodic condition checked as its residues: torch's expression can be undefined at some
    sizes (a modulo by ``width % 7``, zero at multiples of 7), and a call there must get an answer."""
    found = _residues(condition, members)
    if found is None:
        return condition
    period, kept = found
    symbol = condition.symbols[0]
    return dataclasses.replace(condition, expression=f"({symbol} % {period}) in {kept!r}", symbols=(symbol,))


# The source of the conditions that equate dims torch.export merged (one symbol, or one expression).
_ONE_SIZE = "dims traced as one"


def _one_size_each(
    dims: tuple[tuple[int, int, str], ...], signature: ProgramSignature, names: Mapping[str, str]
) -> tuple[tuple[tuple[int, int, str], ...], list[SizeCondition], dict[str, str]]:
    """Each symbol found at several input dims checked as one size there: the later dims get
    symbols of their own (``s3__2``…, labelled ``input.shape[d]``) and a condition equating them
    with the first."""
    first: dict[str, tuple[int, int]] = {}
    seen: dict[str, int] = {}
    renamed, conditions, labels = [], [], {}
    inputs = [node.name for node, _ in signature.tensor_inputs]
    for position, dim, symbol in dims:
        if symbol not in first:
            first[symbol] = (position, dim)
            renamed.append((position, dim, symbol))
            continue
        seen[symbol] = seen.get(symbol, 1) + 1
        alias = f"{symbol}__{seen[symbol]}"
        renamed.append((position, dim, alias))
        labels[alias] = f"{inputs[position]}.shape[{dim}]"
        where = f"{inputs[first[symbol][0]]}.shape[{first[symbol][1]}] == {labels[alias]}"
        conditions.append(SizeCondition(
            f"({symbol} == {alias})", (symbol, alias), _ONE_SIZE,
            summary=f"{where} (both {names.get(symbol, symbol)})",
        ))
    return tuple(renamed), conditions, labels


def _derived_dims(
    signature: ProgramSignature, names: Mapping[str, str]
) -> tuple[list[tuple[int, int, str]], list[SizeCondition], dict[str, str]]:
    """Input dims whose size torch.export made an expression of other dims (``2*s0``): each gets a
    symbol of its own (labelled ``input.shape[d]``) and a condition equating it with the expression."""
    inputs = [node.name for node, _ in signature.tensor_inputs]
    dims, conditions, labels = [], [], {}
    for position, (node, _) in enumerate(signature.tensor_inputs):
        for dim, size in enumerate(getattr(node.meta.get("val"), "shape", ())):
            if not isinstance(size, torch.SymInt) or isinstance(size.node.expr, sympy.Symbol):
                continue
            expression = size.node.expr
            source = _python(expression)
            if source is None or not expression.free_symbols:
                continue
            alias = f"{inputs[position]}__{dim}"
            labels[alias] = f"{inputs[position]}.shape[{dim}]"
            symbols = sorted(s.name for s in expression.free_symbols)
            dims.append((position, dim, alias))
            conditions.append(SizeCondition(
                f"({alias} == {source})", (alias, *symbols), _ONE_SIZE,
                summary=f"{labels[alias]} == {_named(_readable(expression), symbols, names)}",
            ))
    return dims, conditions, labels


def size_conditions(
    program: torch.export.ExportedProgram, signature: ProgramSignature, names: Mapping[str, str] | None = None,
    one_size_per_symbol: bool = False,
) -> SizeConditions:
    """What ``program`` assumes of its graph inputs' sizes (see the module docstring). ``names``
    are the dims' names (user names for symbols); dims of one name are one size.

    ``one_size_per_symbol``: every symbol's dims must agree, even where operators would broadcast
    them, and an input dim torch.export made an expression of others (``2*B``) must equal it. For
    a program traced from its example sizes (capture's last strategy): torch.export then merges
    dims it finds equal through derived sizes (a quotient of two batches that is 1), and the graph
    computes with that equality (a reshape to 1 row), which broadcasting cannot undo.
    """
    names = dict(names or {})
    dims = _input_dims(signature)
    merged: list[SizeCondition] = []
    labels: dict[str, str] = {}
    if one_size_per_symbol:
        dims, merged, labels = _one_size_each(dims, signature, names)
        derived, conditions_of_derived, labels_of_derived = _derived_dims(signature, names)
        dims, merged, labels = (*dims, *derived), merged + conditions_of_derived, {**labels, **labels_of_derived}
    groups: dict[str, list[str]] = {}
    for _, _, symbol in dims:
        members = groups.setdefault(names.get(symbol, symbol), [])
        if symbol not in members:
            members.append(symbol)
    group_of = {symbol: name for name, members in groups.items() for symbol in members}
    candidates = [
        c for c in (*_ranges(program, set(group_of)), *_deferred_asserts(program), *_unwritten_asserts(program), *_guards(program, signature))
        # Relations between two dims are left out: torch.onnx runs calls that break them.
        if c.symbols and set(c.symbols) <= set(group_of) and len({group_of[s] for s in c.symbols}) == 1
        and not _assumes_no_small_sizes(c)
    ]
    unique: dict[str, SizeCondition] = {}
    for condition in candidates:
        unique.setdefault(str(condition.expression), condition)
    conditions = []
    for condition in _essential(list(unique.values()), groups):
        name = group_of[condition.symbols[0]]
        summary = _summary(condition, groups[name], name)
        if summary is None:
            # Not a bound, a range or a multiple: what torch recorded of a size derived from
            # this dim (a reshape's, a convolution's) rather than of the dim; left unchecked, as
            # before, rather than refuse calls the graph may well compute.
            logger.debug("size condition not enforced: %s", condition.expression)
            continue
        if "%" in summary:
            condition = _as_residues(condition, groups[name])
        conditions.append(dataclasses.replace(condition, summary=summary))
    # Squeezed dims are about sizes 0 and 1, which the filters above leave to torch.export's
    # assumption: taken as they are.
    for condition in _squeezed_dims(program):
        if condition.symbols[0] not in group_of or str(condition.expression) in unique:
            continue
        unique[str(condition.expression)] = condition
        name = group_of[condition.symbols[0]]
        summary = _unit_size(condition, groups[name], name)
        if summary is not None:
            conditions.append(dataclasses.replace(condition, summary=summary))
    conditions.extend(merged)
    if conditions:
        logger.debug("size conditions: %s", [str(c.expression) for c in conditions])
    return SizeConditions(tuple(conditions), dims, labels)
