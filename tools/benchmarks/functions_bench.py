"""Repeated blocks as ONNX functions against depth: export, model size, ONNX Runtime session and run.

    python tools/benchmarks/functions_bench.py                    # Llama at 8, 32 and 64 layers
    python tools/benchmarks/functions_bench.py --layers 8 --exporters functions,inlined

For each depth, each of these runs in a fresh process: *capture* (``torch.export.export`` alone,
the floor), *inlined* (``torch_onnx_fx.export``), *functions* (the same with
``export_modules_as_functions=True``) and *torch.onnx* (``torch.onnx.export(dynamo=True)``, which
ignores the argument). Each records the first export's time (and torch_onnx_fx's phases), the
faster of two further exports in the same process, the main graph's nodes, the functions, the
saved model's size without weights, ONNX Runtime's session creation time (best of 3) and one
forward's latency (median of 20, 1 thread). The logits of every ONNX model are compared with
eager. The Llama is built from a small config with random weights (hidden 256, 8 heads, 4 KV
heads, sequence 16). Results: ``tools/results/functions.jsonl``; page: ``docs/functions.md``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tools._common import REPO, describe_machine, describe_versions, machine_info, read_entries, replace_section  # noqa: E402

RESULTS = REPO / "tools" / "results" / "functions.jsonl"
PAGE = REPO / "docs" / "functions.md"
START, END = "<!-- functions-bench:start -->", "<!-- functions-bench:end -->"
EXPORTERS = ("capture", "inlined", "functions", "torch.onnx")

_WORKER = textwrap.dedent(
    """
    import json, statistics, sys, time, torch, transformers
    layers, exporter = int(sys.argv[1]), sys.argv[2]
    config = transformers.LlamaConfig(hidden_size=256, num_hidden_layers=layers, num_attention_heads=8,
        num_key_value_heads=4, intermediate_size=512, vocab_size=1000)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 1000, (1, 16))
    kwargs = {"use_cache": False}
    record = {"model": "llama", "layers": layers, "exporter": exporter}

    def export_once():
        if exporter == "capture":
            torch.export.export(model, (ids,), kwargs=kwargs, strict=False)
            return None
        if exporter in ("inlined", "functions"):
            import torch_onnx_fx
            return torch_onnx_fx.export(model, (ids,), kwargs=kwargs, dynamo=True,
                export_modules_as_functions=exporter == "functions")
        return torch.onnx.export(model, (ids,), kwargs=kwargs, dynamo=True, verbose=False)

    program = None
    for key in ("seconds", "warm_seconds", "warm_seconds"):
        start = time.perf_counter()
        program = export_once()
        elapsed = round(time.perf_counter() - start, 3)
        record[key] = min(elapsed, record.get(key, elapsed))
    if program is not None:
        import onnxruntime as ort
        proto = program.model_proto
        record["nodes"] = len(proto.graph.node)
        record["functions"] = len(proto.functions)
        record["function_nodes"] = sum(len(f.node) for f in proto.functions)
        serialized = proto.SerializeToString()
        for initializer in proto.graph.initializer:
            initializer.ClearField("raw_data")
        record["graph_bytes"] = proto.ByteSize()
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            session = ort.InferenceSession(serialized, options, providers=["CPUExecutionProvider"])
            best = min(best, time.perf_counter() - start)
        record["session_seconds"] = round(best, 4)
        feeds = {session.get_inputs()[0].name: ids.numpy()}
        session.run(None, feeds)
        times = []
        for _ in range(20):
            start = time.perf_counter()
            (logits,) = session.run(None, feeds)[:1]
            times.append(time.perf_counter() - start)
        record["run_ms"] = round(statistics.median(times) * 1000, 3)
        with torch.no_grad():
            expected = model(ids, **kwargs).logits
        record["max_abs_diff"] = float((torch.from_numpy(logits) - expected).abs().max())
    record["status"] = "ok"
    print("RESULT " + json.dumps(record))
    """
)

_PHASE = re.compile(r"\[torch_onnx_fx\] (\w+): ok in ([0-9.]+) s")


def run_one(layers: int, exporter: str, timeout: float) -> dict[str, Any]:
    base = {"model": "llama", "layers": layers, "exporter": exporter}
    try:
        done = subprocess.run([sys.executable, "-c", _WORKER, str(layers), exporter], capture_output=True, text=True, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {**base, "status": "timeout"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {**base, "status": "failed", "error": tail[:200]}
    record = json.loads(lines[-1][len("RESULT "):])
    phases: dict[str, float] = {}
    for name, seconds in _PHASE.findall(done.stderr):
        phases.setdefault(name, float(seconds))  # the first export's
    if phases:
        record["phases"] = phases
    return record


def render(machine: dict[str, Any], records: list[dict[str, Any]]) -> str:
    by_key = {(r["layers"], r["exporter"]): r for r in records}
    depths = sorted({r["layers"] for r in records})
    lines = [
        START,
        "",
        f"Generated by `python tools/benchmarks/functions_bench.py` on {describe_machine(machine)}, "
        f"{describe_versions(machine, ('torch', 'onnxscript', 'onnxruntime'))}, commit {machine['commit']}, {machine['date']}. "
        "Llama (hidden 256, 8 heads, 4 KV heads), sequence 16, random weights; each exporter in a fresh process. "
        "*first* is the first export in the process, *warm* the faster of two more; ratios are to `torch.export`'s "
        "capture of the same model in its own fresh process (first) and warm. ONNX Runtime: session creation best of 3, "
        "one forward median of 20, 1 thread.",
        "",
        "| layers | exporter | first s | ÷ capture | warm s | ÷ capture | nodes (main + functions) | graph KB | session s | forward ms | max |logits − eager| |",
        "|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for depth in depths:
        capture = by_key.get((depth, "capture"), {})
        for exporter in EXPORTERS:
            r = by_key.get((depth, exporter))
            if r is None:
                continue
            if r.get("status") != "ok":
                lines.append(f"| {depth} | {exporter} | {r.get('status')} {r.get('error', '')[:80]} |" + " |" * 9)
                continue

            def ratio(key: str, r: dict[str, Any] = r) -> str:
                return f"{r[key] / capture[key]:.2f}" if capture.get(key) else "–"

            nodes = "–" if "nodes" not in r else (
                f"{r['nodes']} + {r['function_nodes']} in {r['functions']}" if r.get("functions") else str(r["nodes"])
            )
            graph = f"{r['graph_bytes'] / 1024:.0f}" if "graph_bytes" in r else "–"
            session = f"{r['session_seconds']:.3f}" if "session_seconds" in r else "–"
            run = f"{r['run_ms']:.2f}" if "run_ms" in r else "–"
            diff = f"{r['max_abs_diff']:.1e}" if "max_abs_diff" in r else "–"
            lines.append(
                f"| {depth} | {exporter} | {r['seconds']:.2f} | {ratio('seconds')} | {r['warm_seconds']:.2f} | {ratio('warm_seconds')} | "
                f"{nodes} | {graph} | {session} | {run} | {diff} |"
            )
    phases = [(r["layers"], r["phases"]) for r in records if r["exporter"] == "functions" and r.get("phases")]
    if phases:
        lines += ["", "Phases of the first export with functions (s): " + "; ".join(
            f"{depth} layers: " + ", ".join(f"{k} {v:.2f}" for k, v in p.items()) for depth, p in sorted(phases)
        ) + "."]
    lines += ["", END]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", default="8,32,64")
    parser.add_argument("--exporters", default=",".join(EXPORTERS))
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--render-only", action="store_true")
    options = parser.parse_args()
    entries = list(read_entries(RESULTS)) if RESULTS.exists() else []
    machines = [e for kind, e in entries if kind == "machine"]
    records = [e for kind, e in entries if kind == "record"]
    if not options.render_only:
        machine = machine_info("python tools/benchmarks/functions_bench.py " + " ".join(sys.argv[1:]))
        fresh = []
        for layers in [int(x) for x in options.layers.split(",")]:
            for exporter in options.exporters.split(","):
                record = run_one(layers, exporter, options.timeout)
                print(json.dumps(record), flush=True)
                fresh.append({**record, "commit": machine["commit"]})
        done = {(r["layers"], r["exporter"]) for r in fresh}
        records = [r for r in records if (r["layers"], r["exporter"]) not in done] + fresh
        machines = [machine]
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text("\n".join(json.dumps({"kind": kind, **e}) for kind, e in [("machine", machine)] + [("record", r) for r in records]) + "\n")
    text = PAGE.read_text()
    section = render(machines[-1], records)
    updated = replace_section(text, START, END, section)
    PAGE.write_text(updated if updated is not None else text.rstrip() + "\n\n" + section + "\n")


if __name__ == "__main__":
    main()
