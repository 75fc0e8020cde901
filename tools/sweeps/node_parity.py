"""Graph size and ONNX Runtime latency outside transformers, side by side with torch.onnx.

Every case of ``tools/corpus/signal_models.py`` (audio front ends, spectral filters, half
precision, complex arithmetic, graph networks, pixel shuffles, RWKV) is exported by both
exporters in one process. Per case: nodes in each graph, the ONNX Runtime CPU latency of each
(one intra-op thread, default session options, the two sessions called in turn, median), and
each graph's largest output difference from eager relative to the output's magnitude. Per
family: the geometric mean of the node ratio and of the latency ratio (ours ÷ torch.onnx's).

    python tools/sweeps/node_parity.py [--calls 200] [--cases log_mel_64,gcn]

Results: ``tools/results/node_parity.jsonl``; the page ``docs/node_parity.md``.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO, REPO / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from helpers import flat_tensors  # noqa: E402
from tools._common import describe_machine, describe_versions, machine_info, merge_results, read_results  # noqa: E402
from tools.benchmarks.decode_bench import open_sessions, time_interleaved  # noqa: E402
from tools.sweeps.torchao_sweep import relative_difference  # noqa: E402

RESULTS = REPO / "tools" / "results" / "node_parity.jsonl"
PAGE = REPO / "docs" / "node_parity.md"
EXPORTERS = ("torch_onnx_fx", "torch.onnx")


def _export(exporter: str, model: Any, args: tuple, shapes: Any) -> Any:
    import torch

    if exporter == "torch.onnx":
        return torch.onnx.export(model, args, dynamic_shapes=shapes, dynamo=True, verbose=False)
    import torch_onnx_fx

    return torch_onnx_fx.export(model, args, dynamic_shapes=shapes, verbose=False)


def _feeds(program: Any, args: tuple) -> dict[str, Any]:
    """The graph's inputs from the arguments, as the program converts them (complex as pairs)."""
    import torch

    return {
        value.name: (torch.view_as_real(arg) if arg.is_complex() else arg).numpy()
        for value, arg in zip(program.model.graph.inputs, args)
    }


def run_case(case: Any, calls: int) -> dict[str, Any]:
    import onnx_ir as ir
    import torch

    record: dict[str, Any] = {"case": case.name, "family": case.family}
    torch.manual_seed(0)
    model = case.make().eval()
    args = case.inputs()
    with torch.no_grad():
        expected = flat_tensors(model(*args))
    graphs, feeds = {}, {}
    for exporter in EXPORTERS:
        start = time.perf_counter()
        try:
            program = _export(exporter, model, args, case.dynamic_shapes)
            actual = flat_tensors(program(*args))
            difference, exact = relative_difference(actual, expected), _exact_share(actual, expected)
            if all(arg.dtype != torch.bfloat16 for arg in args):
                # numpy has no bfloat16: such graphs are counted and compared, not timed.
                graphs[exporter] = ir.serde.serialize_model(program.model).SerializeToString()
                feeds[exporter] = _feeds(program, args)
        except Exception as exc:  # noqa: BLE001 - the failure is the result
            record[exporter] = {"status": "failed", "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
            continue
        record[exporter] = {
            "status": "ok", "nodes": len(program.model.graph), "difference": difference, "exact_share": exact,
            "export_s": round(time.perf_counter() - start, 2),
            "op_types": dict(collections.Counter(node.op_type for node in program.model.graph)),
        }
    if len(graphs) == len(EXPORTERS):
        # program(...) has run each graph in ONNX Runtime already: the sessions open.
        for exporter, ms in time_interleaved(open_sessions(graphs, 1), feeds, calls).items():
            record[exporter]["ort_ms"] = round(ms, 4)
    return record


def _exact_share(actual: list[Any], expected: list[Any]) -> float | None:
    """The share of output elements equal to eager's bit for bit (NaN to NaN): what a half-precision
    graph's casts buy shows here, not in the largest difference."""

    if len(actual) != len(expected) or any(a.shape != e.shape for a, e in zip(actual, expected)):
        return None
    total = sum(e.numel() for e in expected)
    same = sum(int(((a == e) | (a.isnan() & e.isnan()) if e.is_floating_point() else (a == e)).sum()) for a, e in zip(actual, expected))
    return same / total if total else 1.0


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def _ratios(record: dict[str, Any], key: str) -> float | None:
    ours, theirs = record.get("torch_onnx_fx", {}), record.get("torch.onnx", {})
    if ours.get(key) and theirs.get(key):
        return ours[key] / theirs[key]
    return None


def _difference(view: dict[str, Any]) -> str:
    if view.get("status") != "ok":
        return "failed"
    return "structure" if view["difference"] is None else f"{view['difference']:.1e}"


def _closer(record: dict[str, Any]) -> str | None:
    """Which graph is closer to eager: the smaller largest difference, then the larger bit-exact
    share; a failed export or a structural mismatch is farthest. None: a tie."""

    def distance(view: dict[str, Any]) -> tuple[float, float]:
        if view.get("status") != "ok" or view.get("difference") is None:
            return (math.inf, math.inf)
        return (view["difference"], -(view.get("exact_share") or 0.0))

    ours, theirs = distance(record.get("torch_onnx_fx", {})), distance(record.get("torch.onnx", {}))
    return None if ours == theirs else "torch_onnx_fx" if ours < theirs else "torch.onnx"


def _share(view: dict[str, Any]) -> str:
    share = view.get("exact_share")
    return "–" if share is None else f"{100 * share:.0f} %"


def _extra_ops(record: dict[str, Any]) -> str:
    ours = record.get("torch_onnx_fx", {}).get("op_types", {})
    theirs = record.get("torch.onnx", {}).get("op_types", {})
    more = {op: ours.get(op, 0) - theirs.get(op, 0) for op in set(ours) | set(theirs)}
    return ", ".join(f"{op} {count:+d}" for op, count in sorted(more.items(), key=lambda item: (-item[1], item[0])) if count > 0)


# What each family's extra nodes buy (issue 28: keep only what exactness needs). Kept by hand
# beside the measurements: the per-case columns show the op types, the differences and the
# bit-exact shares they refer to.
_WHY = [
    "## What the extra nodes buy",
    "",
    "- **audio, spectral, complex**: the DFT of `stft`, `istft` and every FFT (`rfft` and `irfft` too) is "
    "computed in float64 (`Cast`s around one `MatMul` or `DFT`): ONNX Runtime's float32 `STFT`/`DFT` sum "
    "lengths that are not powers of two term by term, and drift past the tolerance on longer frames (log-mel "
    "at n_fft 400: 11 % of torch.onnx's outputs are eager's bits, 80 % of ours, at a quarter of its latency; "
    "an `irfft` of 1,000 samples: 1.9e-4 of the largest magnitude off, ours 8.5e-8). `abs` of a complex64 "
    "value is the float64 root of its parts' squares (ATen's correctly rounded `hypot`; torch.onnx's float32 "
    "`ReduceL2` overflows past 1.8e19) plus the rule that inf beats NaN (`IsInf`, `ReduceMax`, `Where`).",
    "- **half**: ATen computes float16/bfloat16 products, convolutions, norms and reductions in float32 and "
    "rounds each operator's result once; the graph does too, with a `Cast` at each rounding. ONNX Runtime "
    "has no float16 kernel for most operators and, running them in float32 itself, drops the roundings "
    "between neighbours: torch.onnx's graphs round once per chain (73 % of a float16 MLP's outputs are "
    "eager's bits, 100 % of ours). torch.onnx's bfloat16 graphs do not run.",
    "- **graph**: `scatter_reduce` with `amax`/`amin` propagates NaN as ATen does (ONNX Runtime's "
    "`ScatterElements(max)` skips it: `IsNaN`, `Where`), and `mean` is a sum divided by a count "
    "(torch.onnx's is the last value written).",
    "- **rwkv**: `-exp(time_decay)` stays in the graph because `apply_weights` must be able to replace "
    "`time_decay` (torch.onnx folds it into an anonymous constant that `apply_weights` cannot reach); "
    "`1 - mix` is folded, with its recipe; `sigmoid` is ATen's 1 / (1 + exp(-x)) (ONNX Runtime's `Sigmoid` "
    "is accurate to about 3e-8 absolutely, not relatively: 0 below -19, where eager gives 2.1e-9 at -20).",
    "",
]


def render(machine: dict[str, Any], records: list[dict[str, Any]]) -> str:
    lines = [
        "# Graph size outside transformers",
        "",
        f"Generated by `python tools/sweeps/node_parity.py` on {describe_machine(machine)}, "
        f"{describe_versions(machine, ('torch', 'onnxscript', 'onnxruntime'))}, commit {machine['commit']}, {machine['date']}. "
        "Models from `tools/corpus/signal_models.py`, random weights; both exporters in one process. "
        "*ms*: ONNX Runtime CPU, one thread, the two graphs called in turn, median. *difference*: the "
        "largest output difference from eager, relative to the output's largest magnitude. *bit-exact "
        "share*: the output elements equal to eager's bit for bit. *our extra ops*: op types our graph "
        "has more of than torch.onnx's.",
        "",
        "| family | cases | node ratio (geomean) | latency ratio (geomean) | closer to eager: ours / torch.onnx's |",
        "|---|---:|---:|---:|---:|",
    ]
    families = dict.fromkeys(record["family"] for record in records)
    for family in [*families, None]:
        rows = [r for r in records if family is None or r["family"] == family]
        nodes = [x for x in (_ratios(r, "nodes") for r in rows) if x]
        latency = [x for x in (_ratios(r, "ort_ms") for r in rows) if x]
        closer = collections.Counter(_closer(r) for r in rows)
        lines.append(
            f"| {family or 'all'} | {len(rows)} | {_geomean(nodes):.2f} | {_geomean(latency):.2f} | "
            f"{closer['torch_onnx_fx']} / {closer['torch.onnx']} |"
        )
    lines.append("")
    lines += _WHY
    lines += [
        "| case | family | nodes (ours / torch.onnx) | ms (ours / torch.onnx) | latency ratio | difference (ours / torch.onnx) | bit-exact share (ours / torch.onnx) | our extra ops |",
        "|---|---|---:|---:|---:|---|---|---|",
    ]
    for r in records:
        ours, theirs = r.get("torch_onnx_fx", {}), r.get("torch.onnx", {})
        latency = _ratios(r, "ort_ms")
        lines.append(
            f"| {r['case']} | {r['family']} | {ours.get('nodes', '–')} / {theirs.get('nodes', '–')} | "
            f"{ours.get('ort_ms', '–')} / {theirs.get('ort_ms', '–')} | {f'{latency:.2f}' if latency else '–'} | "
            f"{_difference(ours)} / {_difference(theirs)} | {_share(ours)} / {_share(theirs)} | {_extra_ops(r)} |"
        )
    failures = [(r["case"], e, r[e]["error"]) for r in records for e in EXPORTERS if r.get(e, {}).get("status") == "failed"]
    if failures:
        lines += ["", "Failures:", ""] + [f"- {case}, {exporter}: {error}" for case, exporter, error in failures]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="timed calls per graph")
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--render-only", action="store_true")
    options = parser.parse_args(argv)
    if not options.render_only:
        warnings.simplefilter("ignore")
        import logging

        logging.disable(logging.WARNING)
        from tools.corpus.signal_models import SIGNAL_CASES

        wanted = set(filter(None, options.cases.split(",")))
        cases = [case for case in SIGNAL_CASES if not wanted or case.name in wanted]
        machine = machine_info("python tools/sweeps/node_parity.py " + " ".join(sys.argv[1:] if argv is None else argv))
        records = []
        for case in cases:
            record = run_case(case, options.calls)
            print(json.dumps({k: v for k, v in record.items()}, default=str)[:400], flush=True)
            records.append(record)
        merge_results(RESULTS, machine, records, ("case",))
    machine, records = read_results(RESULTS)
    PAGE.write_text(render(machine, records))
    print(f"wrote {PAGE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
