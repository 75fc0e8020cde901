"""Parity: what a user sees from torch_onnx_fx and from torch.onnx.export(dynamo=True), compared.

For every case — each model of the corpus (``tools/corpus/models.py``), operator samples of the operator
sweep, and the boundary cases below (stateful modules, ``None`` outputs, size-1 dynamic dims,
refinable ``Dim`` ranges, legacy arguments) — both exporters run on the same call in one worker
process, and what a user can observe is recorded: whether the export succeeded (else the error
type), the graph inputs and outputs (number, order, names, dtypes, shapes with dimension names),
what ``program(*args)`` returns (count, dtypes, shapes) and which warning categories were raised.
Every difference is a *divergence*; those we keep on purpose are listed in :data:`DELIBERATE` (and
in ``docs/migration.md``), the rest are bugs to fix.

    python tools/sweeps/parity.py                         # corpus + quick op samples + boundary cases
    python tools/sweeps/parity.py --cases boundary        # one group: boundary, models, ops
    python tools/sweeps/parity.py --ops all --samples 2   # every OpInfo op (about an hour)

Results: ``tools/results/parity.jsonl``; the page ``docs/parity.md`` is rewritten from them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import re
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO, REPO / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from tools._common import machine_info, read_entries  # noqa: E402

OURS, THEIRS = "torch_onnx_fx", "torch.onnx"
DEFAULT_JSON = REPO / "tools" / "results" / "parity.jsonl"
DEFAULT_PAGE = REPO / "docs" / "parity.md"

# Divergences kept on purpose: (field, predicate on (ours, theirs)) -> reason. Anything else that
# differs is reported as a bug.
DELIBERATE: list[tuple[str, Callable[[Any, Any], bool], str]] = [
    ("status", lambda ours, theirs: ours == "ok" and theirs != "ok", "torch.onnx fails where we export (better)"),
    ("call", lambda ours, theirs: ours is not None and theirs is not None and _complex_as_pairs(ours) == theirs,
     "complex outputs come back complex, not as real pairs"),
    ("inputs", lambda ours, theirs: _renamed_passthrough(ours, theirs),
     "an input returned as-is keeps its name (torch.onnx renames the input to <name>_orig)"),
    ("call", lambda ours, theirs: ours is not None and theirs is None,
     "torch.onnx's graph does not run in ONNX Runtime (better)"),
    ("inputs", lambda ours, theirs: _path_named(ours, theirs),
     "nested inputs are named by their path (cache.layers.0.keys, extra.a); torch.onnx's by argument and position (cache_0)"),
    ("size_conditions", lambda ours, theirs: ours is True and not theirs,
     "the model's Python code decided on sizes while it was traced: we state them and refuse other sizes in "
     "program(...); torch.onnx's graph silently computes the traced branch for them"),
    ("outputs", lambda ours, theirs: _same_but_names(ours, theirs),
     "output names are FX node names; torch.onnx re-traces every program, which renames them (add → add_4, getitem)"),
]

# Divergences of one case kept on purpose: (case, field) -> reason.
DELIBERATE_CASES = {
    ("dynamic-axes-output-names", "inputs"): "torch.onnx pairs dynamic_axes keys with inputs by dict order and makes x dynamic instead of b",
    ("dynamic-axes-output-names", "outputs"): "follows from the inputs: b_out is the dynamic output, as asked",
}


# -- what a user sees ------------------------------------------------------------------------------

_SYMBOL = re.compile(r"\bs\d+\b")
# torch.onnx warns that a dim name "will not be used" even when both axes got the *same* name
# (input_ids and attention_mask both "sequence"): nothing is lost, so it is not compared.
# The warning of a program valid only for some sizes (ONNXProgram.size_conditions).
_SIZE_CONDITIONS = "The exported graph is valid only for inputs where"
_SAME_NAME = re.compile(r"# The axis name: (\S+) will not be used, since it shares the same shape constraints with another axis: \1\.")


def _dim(dim: Any) -> Any:
    """A dim as a user compares it: ints as they are, torch.export's own symbols (``s17``) as
    ``"?"`` (their numbering is arbitrary), names the user chose as they are."""
    value = getattr(dim, "value", dim)
    if isinstance(value, int):
        return value
    if value is None or _SYMBOL.search(str(value)):
        return "?"
    return str(value)


def _values(values: Sequence[Any]) -> list[list[Any]]:
    return [
        [v.name, v.dtype.name if v.dtype is not None else None, None if v.shape is None else [_dim(d) for d in v.shape]]
        for v in values
    ]


def _call_view(results: Sequence[Any]) -> list[list[Any]]:
    return [[str(r.dtype).removeprefix("torch."), list(r.shape)] for r in results]


def _complex_as_pairs(view: list[list[Any]]) -> list[list[Any]]:
    pairs = {"complex64": "float32", "complex128": "float64"}
    return [[pairs[d], [*s, 2]] if d in pairs else [d, s] for d, s in view]


def _same_but_names(ours: Any, theirs: Any) -> bool:
    """Equal but for the names: same count, dtypes and shapes."""
    if not ours or not theirs or len(ours) != len(theirs):
        return False
    return all(a[1:] == b[1:] for a, b in zip(ours, theirs))


def _path_named(ours: Any, theirs: Any) -> bool:
    """Equal but for the names of nested inputs, ours a dotted path."""
    return _same_but_names(ours, theirs) and all(a[0] == b[0] or "." in a[0] for a, b in zip(ours, theirs))


def _canonical(field: Any) -> Any:
    """Symbolic dims in a canonical form (``width*height`` and ``height*width`` are one dim)."""
    if not isinstance(field, list):
        return field
    result = []
    for entry in field:
        if isinstance(entry, list) and len(entry) == 3 and isinstance(entry[2], list):
            entry = [entry[0], entry[1], [_canonical_dim(d) for d in entry[2]]]
        result.append(entry)
    return result


def _canonical_dim(dim: Any) -> Any:
    if not isinstance(dim, str) or dim == "?":
        return dim
    import sympy

    try:
        return str(sympy.sympify(dim))
    except (sympy.SympifyError, TypeError, SyntaxError):
        return dim


def _renamed_passthrough(ours: Any, theirs: Any) -> bool:
    if not ours or not theirs or len(ours) != len(theirs):
        return False
    return all(a == b or (a[1:] == b[1:] and b[0] == f"{a[0]}_orig") for a, b in zip(ours, theirs))


def observe(export: Callable[[], Any], call_inputs: tuple[tuple[Any, ...], dict[str, Any]]) -> dict[str, Any]:
    """Run one export and one call; what a user sees of them."""
    view: dict[str, Any] = {"status": "ok", "error": None, "inputs": None, "outputs": None, "call": None, "warnings": []}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            program = export()
        except Exception as exc:  # noqa: BLE001 - the error type is what we compare
            view["status"], view["error"] = type(exc).__name__, str(exc).splitlines()[0][:300] if str(exc) else ""
            program = None
    relevant = [w for w in caught if w.category in (UserWarning, DeprecationWarning)]
    view["ignored_warnings"] = sorted({str(w.message).splitlines()[0] for w in relevant if _SAME_NAME.search(str(w.message))})
    # Our statement of the sizes the model's Python code decided on is compared on its own.
    view["size_conditions"] = any(_SIZE_CONDITIONS in str(w.message) for w in relevant)
    view["warnings"] = sorted({
        w.category.__name__ for w in relevant if not _SAME_NAME.search(str(w.message)) and _SIZE_CONDITIONS not in str(w.message)
    })
    if program is None:
        return view
    graph = program.model.graph
    view["inputs"], view["outputs"] = _values(graph.inputs), _values(graph.outputs)
    args, kwargs = call_inputs
    try:
        view["call"] = _call_view(program(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001
        view["call_error"] = type(exc).__name__
    return view


def divergences(ours: dict[str, Any], theirs: dict[str, Any], case: str = "") -> list[dict[str, Any]]:
    """Each field that differs, with the reason when it is deliberate."""
    found = []
    fields = ["status", "inputs", "outputs", "call", "warnings", "size_conditions"]
    if ours["status"] != "ok" and theirs["status"] != "ok":
        fields = ["status"]
    elif ours["status"] != theirs["status"]:
        fields = ["status"]
    for field in fields:
        a, b = _canonical(ours.get(field)), _canonical(theirs.get(field))
        if a == b:
            continue
        reason = DELIBERATE_CASES.get((case, field)) or next(
            (why for name, test, why in DELIBERATE if name == field and test(a, b)), None
        )
        found.append({"field": field, "ours": a, "theirs": b, "deliberate": reason})
    return found


# -- the cases -------------------------------------------------------------------------------------


@dataclasses.dataclass
class Case:
    """``make()`` returns ``(model, args, export keyword arguments, (call args, call kwargs))``."""

    name: str
    group: str
    make: Callable[[], tuple[Any, tuple[Any, ...], dict[str, Any], tuple[tuple[Any, ...], dict[str, Any]]]]


def _boundary_cases() -> list[Case]:
    import torch
    from torch import nn
    from torch.export import Dim

    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros(1))

        def forward(self, x):
            self.count.add_(1)
            return x + self.count

    class WithNone(nn.Module):
        def forward(self, x):
            return x + 1, None

    class Passthrough(nn.Module):
        def forward(self, x, y):
            return x, y * 2

    class InputMutation(nn.Module):
        def forward(self, x):
            x.mul_(2)
            return x + 1

    class CatAdd(nn.Module):
        def forward(self, x, y, z):
            return torch.cat((x, y), dim=1) + z

    class NeedsRange(nn.Module):
        def forward(self, x, y):
            if x.shape[0] >= 6 and y.shape[0] <= 16:
                return x * 2.0, y + 1
            return x, y

    class TwoInputs(nn.Module):
        def forward(self, x, b):
            return x.relu(), b.sigmoid()

    class Nested(nn.Module):
        def forward(self, x, ys: list, zs: dict, c):
            return x + ys[0] + ys[1] + zs["a"] + zs["b"], c * 2

    class Reduce(nn.Module):
        def forward(self, x):
            return x.sum(dim=-1), x.mean()

    class Attention(nn.Module):
        def forward(self, q, k, v):
            return nn.functional.scaled_dot_product_attention(q, k, v)

    def plain(model: Any, args: tuple, **options: Any) -> Callable[[], Any]:
        return lambda: (model, args, options, (args, {}))

    nested = (torch.ones(5), [torch.zeros(5), torch.ones(5)], {"a": torch.zeros(5), "b": torch.ones(5)}, torch.ones(4))
    names = ["input_x", "input_y", "input_z", "d", "e", "f"]
    three = (torch.randn(1, 3), torch.randn(1, 5), torch.randn(1, 8))
    return [
        Case("buffer-mutation", "boundary", plain(Counter(), (torch.randn(2),))),
        Case("none-output", "boundary", plain(WithNone(), (torch.randn(2),))),
        Case("input-passthrough", "boundary", plain(Passthrough(), (torch.randn(2), torch.randn(2)))),
        Case("input-mutation", "boundary", lambda: (InputMutation(), (torch.ones(3),), {}, ((torch.ones(3),), {}))),
        Case("size-one-dynamic-dims", "boundary", plain(
            CatAdd(), three, dynamic_shapes=({0: "batch", 1: "a"}, {0: "batch", 1: "b"}, {0: "batch", 1: "c"}))),
        Case("refinable-dim-ranges", "boundary", plain(
            NeedsRange(), (torch.randn(16), torch.randn(12)), dynamic_shapes={"x": (Dim("dx"),), "y": (Dim("dy"),)})),
        Case("trailing-dict-kwargs", "boundary", lambda: (
            TwoInputs(), (torch.randn(2, 3), {"b": torch.randn(2, 3)}), {}, ((torch.randn(2, 3),), {"b": torch.randn(2, 3)}))),
        Case("dynamic-axes-nested-input-names", "boundary", plain(
            Nested(), nested, input_names=names, dynamic_axes={n: {0: "dim"} for n in names[:5]})),
        Case("dynamic-axes-output-names", "boundary", plain(
            TwoInputs(), (torch.randn(2, 2, 3), torch.randn(2, 2, 3)), input_names=["x", "b"],
            output_names=["x_out", "b_out"], dynamic_axes={"b": [0, 1, 2], "b_out": [0, 1, 2]})),
        Case("opset-17", "boundary", plain(Reduce(), (torch.randn(2, 3),), opset_version=17)),
        Case("opset-13", "boundary", plain(Reduce(), (torch.randn(2, 3),), opset_version=13)),
        Case("opset-23-attention", "boundary", plain(
            Attention(), (torch.rand(2, 4, 8, 16), torch.rand(2, 4, 8, 16), torch.rand(2, 4, 8, 16)), opset_version=23)),
    ]


def _model_cases() -> list[Case]:
    from tools.corpus.models import CORPUS

    def make(case: Any) -> Callable[[], Any]:
        def build() -> Any:
            model, args, kwargs, shapes = case.build()
            call = case.second_inputs() if case.second_inputs is not None else (args, kwargs)
            return model, args, {"kwargs": kwargs, "dynamic_shapes": shapes}, call

        return build

    return [Case(case.name, "models", make(case)) for case in CORPUS]


def _op_cases(ops: str | None, samples: int) -> list[Case]:
    import torch

    from tools.sweeps import opsweep

    infos = opsweep.op_infos()
    keys = list(opsweep.QUICK_OPS) if ops in (None, "quick") else (list(infos) if ops == "all" else ops.split(","))
    cases = []
    for key in keys:
        for index in range(samples):
            def make(key: str = key, index: int = index) -> Any:
                chosen, reason = opsweep._first_samples(infos[key], torch.float32, index + 1)
                if reason is not None or len(chosen) <= index:
                    raise LookupError(reason or f"no sample {index}")
                module = opsweep.OpCall(infos[key].op, chosen[index])
                program = torch.export.export(module, module.fresh_inputs(), strict=False)
                return program, module.fresh_inputs(), {}, (module.fresh_inputs(), {})

            cases.append(Case(f"{key}#{index}", "ops", make))
    return cases


def all_cases(groups: Sequence[str], ops: str | None, samples: int) -> list[Case]:
    cases: list[Case] = []
    if "boundary" in groups:
        cases += _boundary_cases()
    if "models" in groups:
        cases += _model_cases()
    if "ops" in groups:
        cases += _op_cases(ops, samples)
    return cases


# -- running ---------------------------------------------------------------------------------------


def _export_with(exporter: str, model: Any, args: tuple[Any, ...], options: dict[str, Any]) -> Any:
    import torch

    if exporter == OURS:
        import torch_onnx_fx

        return torch_onnx_fx.export(model, args, verbose=False, **options)
    return torch.onnx.export(model, args, dynamo=True, verbose=False, **options)


def run_case(case: Case) -> dict[str, Any]:
    """Both exporters on one case, in this process."""
    import copy

    import torch

    record: dict[str, Any] = {"case": case.name, "group": case.group}
    try:
        model, args, options, call = case.make()
    except LookupError as exc:
        record["skipped"] = str(exc)
        return record
    views = {}
    for exporter in (OURS, THEIRS):
        # Each exporter gets its own copy: a stateful model must not see the other's run.
        fresh_model = model if isinstance(model, torch.export.ExportedProgram) else copy.deepcopy(model)
        fresh = copy.deepcopy((args, options, call))
        views[exporter] = observe(lambda: _export_with(exporter, fresh_model, fresh[0], fresh[1]), fresh[2])
    record["views"] = views
    record["divergences"] = divergences(views[OURS], views[THEIRS], case.name)
    return record


_PRELOAD = ["torch", "transformers", "onnxruntime", "onnxscript", "torch.onnx._internal.exporter._core", "torch_onnx_fx", "tools.sweeps.parity"]


def _worker(groups: Sequence[str], ops: str | None, samples: int, name: str, connection: Any, log_path: str) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    case = next(c for c in all_cases(groups, ops, samples) if c.name == name)
    connection.send(run_case(case))


def sweep(groups: Sequence[str], ops: str | None, samples: int, timeout_s: float) -> Iterator[dict[str, Any]]:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    with tempfile.TemporaryDirectory(prefix="parity-") as scratch:
        for case in all_cases(groups, ops, samples):
            receive, send = context.Pipe(duplex=False)
            log = Path(scratch, re.sub(r"[^\w.-]", "_", case.name) + ".log")
            process = context.Process(target=_worker, args=(groups, ops, samples, case.name, send, str(log)))
            process.start()
            send.close()
            if receive.poll(timeout_s):
                try:
                    yield receive.recv()
                except EOFError:
                    yield {"case": case.name, "group": case.group, "crashed": f"exit code {process.exitcode}"}
            else:
                process.kill()
                yield {"case": case.name, "group": case.group, "timeout": timeout_s}
            process.join()
            receive.close()


# -- the page --------------------------------------------------------------------------------------


def _short(value: Any, limit: int = 140) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    text = text.replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render(header: dict[str, Any], records: Sequence[dict[str, Any]]) -> str:
    """The page; divergences are recomputed from the stored views, so the current rules apply."""
    for record in records:
        if "views" in record:
            record["divergences"] = divergences(record["views"][OURS], record["views"][THEIRS], record["case"])
    compared = [r for r in records if "views" in r]
    bugs = [(r, d) for r in compared for d in r["divergences"] if d["deliberate"] is None]
    deliberate = [(r, d) for r in compared for d in r["divergences"] if d["deliberate"] is not None]
    identical = [r for r in compared if not r["divergences"]]
    lines = [
        "# Parity with torch.onnx",
        "",
        "What a user sees from `torch_onnx_fx.export` and from `torch.onnx.export(dynamo=True)` on the same",
        "call: export status (error type), graph inputs and outputs (order, names, dtypes, shapes and dim",
        "names; torch.export's own `s<N>` symbols compare equal), what `program(*args)` returns, and the",
        "warning categories raised. Generated by `tools/sweeps/parity.py`; deliberate differences are explained",
        "in [migration](migration.md). Regenerate with `python tools/sweeps/parity.py --cases boundary,models,ops`,",
        "or rewrite it from the committed results with `python tools/sweeps/parity.py --render-only`.",
        "",
        f"Run: {header.get('date', '?')}, commit {header.get('commit', '?')}, torch {header.get('torch', '?')}, "
        f"`{header.get('command', '')}`.",
        "",
        "| group | cases compared | identical | deliberate differences only | undiagnosed divergences | not run |",
        "|---|---|---|---|---|---|",
    ]
    groups = sorted({r["group"] for r in records})
    for group in groups:
        mine = [r for r in records if r["group"] == group]
        done = [r for r in mine if "views" in r]
        undiagnosed = {r["case"] for r, _ in bugs if r["group"] == group}
        only_deliberate = {r["case"] for r, _ in deliberate if r["group"] == group} - undiagnosed
        lines.append(
            f"| {group} | {len(done)} | {sum(1 for r in done if not r['divergences'])} | {len(only_deliberate)} | "
            f"{len(undiagnosed)} | {len(mine) - len(done)} |"
        )
    lines += ["", f"{len(identical)} of {len(compared)} cases are identical in every field.", ""]
    lines += ["## Undiagnosed divergences", ""]
    if bugs:
        lines += ["| case | field | torch_onnx_fx | torch.onnx |", "|---|---|---|---|"]
        lines += [f"| {r['case']} | {d['field']} | {_short(d['ours'])} | {_short(d['theirs'])} |" for r, d in bugs]
    else:
        lines.append("None.")
    lines += ["", "## Deliberate differences", ""]
    if deliberate:
        lines += ["| case | field | reason |", "|---|---|---|"]
        lines += [f"| {r['case']} | {d['field']} | {d['deliberate']} |" for r, d in deliberate]
    else:
        lines.append("None.")
    not_run = [r for r in records if "views" not in r]
    if not_run:
        lines += ["", "## Not run", ""]
        lines += [f"- {r['case']}: " + _short(r.get("skipped") or r.get("crashed") or f"timeout after {r.get('timeout')} s") for r in not_run]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="boundary,models,ops", help="comma-separated groups: boundary, models, ops")
    parser.add_argument("--ops", help="op samples: quick (default), all, or comma-separated OpInfo names")
    parser.add_argument("--samples", type=int, default=1, help="samples per op")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per case (both exporters)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--out", type=Path, default=DEFAULT_PAGE)
    parser.add_argument("--render-only", action="store_true", help="rewrite --out from --json")
    options = parser.parse_args(argv)
    if options.render_only:
        entries = list(read_entries(options.json))
        header = next(e for kind, e in entries if kind in ("header", "machine"))
        records = [e for kind, e in entries if kind == "record"]
    else:
        groups = options.cases.split(",")
        command = " ".join(["python", "tools/sweeps/parity.py", *(sys.argv[1:] if argv is None else argv)])
        header = {**machine_info(command), "kind": "header"}
        records = []
        options.json.parent.mkdir(parents=True, exist_ok=True)
        with options.json.open("w") as jsonl:
            jsonl.write(json.dumps(header) + "\n")
            start = time.monotonic()
            for record in sweep(groups, options.ops, options.samples, options.timeout):
                records.append(record)
                jsonl.write(json.dumps({"kind": "record", **record}, default=str) + "\n")
                jsonl.flush()
                state = "compared" if "views" in record else "not run"
                bugs = sum(1 for d in record.get("divergences", []) if d["deliberate"] is None)
                print(f"[{time.monotonic() - start:6.0f} s] {record['case']}: {state}, {bugs} undiagnosed divergence(s)", flush=True)
    options.out.write_text(render(header, records))
    print(f"{len(records)} cases; page: {options.out}")
    return 0


if __name__ == "__main__":
    from tools.sweeps.parity import main as _main

    sys.exit(_main())
