"""Export time against depth, per phase, side by side with torch.onnx; and the meta-device 8B export.

    python tools/benchmarks/depth_bench.py                      # Llama and BERT, 2 → 64 layers, both exporters
    python tools/benchmarks/depth_bench.py --layers 2,8 --models llama --exporters torch_onnx_fx

Each (model, depth, exporter) runs in a fresh process: ``capture`` is ``torch.export.export``
alone (the floor), ``torch_onnx_fx`` reports its phase times, ``torch.onnx`` is
``torch.onnx.export(dynamo=True)``. Models are built from small configs with random weights
(Llama: hidden 256, 8 heads, 4 KV heads; BERT: hidden 256, 4 heads), sequence 16. ``--meta8b``
adds a Llama-3-8B-shaped model built on the ``meta`` device, exported with default settings,
with peak RSS. Results go to ``tools/results/depth.jsonl`` and ``docs/scaling.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tools._common import REPO, describe_machine, describe_versions, machine_info, merge_results, read_results, run_script  # noqa: E402

RESULTS = REPO / "tools" / "results" / "depth.jsonl"
PAGE = REPO / "docs" / "scaling.md"
EXPORTERS = ("capture", "torch_onnx_fx", "torch.onnx")

# One export, in a fresh interpreter; prints one JSON line.
_WORKER = textwrap.dedent(
    """
    import json, resource, sys, time, torch, transformers
    model_name, layers, exporter = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if model_name == "llama":
        config = transformers.LlamaConfig(hidden_size=256, num_hidden_layers=layers, num_attention_heads=8,
            num_key_value_heads=4, intermediate_size=512, vocab_size=1000)
        make, device = transformers.LlamaForCausalLM, "cpu"
    elif model_name == "bert":
        config = transformers.BertConfig(hidden_size=256, num_hidden_layers=layers, num_attention_heads=4,
            intermediate_size=512, vocab_size=1000)
        make, device = transformers.BertModel, "cpu"
    else:  # meta8b
        config = transformers.LlamaConfig(hidden_size=4096, num_hidden_layers=layers, num_attention_heads=32,
            num_key_value_heads=8, intermediate_size=14336, vocab_size=128256)
        make, device = transformers.LlamaForCausalLM, "meta"
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device(device):
        model = make(config).eval()
    ids = torch.zeros(1, 16, dtype=torch.long, device=device)
    kwargs = {"use_cache": False} if "llama" in model_name or model_name == "meta8b" else {}
    record = {"model": model_name, "layers": layers, "exporter": exporter}

    def export_once():
        if exporter == "capture":
            torch.export.export(model, (ids,), kwargs=kwargs, strict=False)
            return None
        if exporter == "torch_onnx_fx":
            import torch_onnx_fx
            return torch_onnx_fx.export(model, (ids,), kwargs=kwargs, dynamo=True)
        return torch.onnx.export(model, (ids,), kwargs=kwargs, dynamo=True, verbose=False)

    # The first export pays each library's one-time costs (imports, registries); the later ones,
    # in the same process, are what every further export costs: the fastest of two is kept, as
    # one run on this 2-core machine moves by a tenth.
    for key in ("seconds", "warm_seconds", "warm_seconds"):
        start = time.perf_counter()
        try:
            program = export_once()
            if program is not None:
                record["nodes"] = len(program.model.graph)
            record["status"] = "ok"
        except Exception as exc:  # noqa: BLE001 - recorded
            record["status"] = "failed"
            record["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        elapsed = round(time.perf_counter() - start, 3)
        record[key] = min(elapsed, record.get(key, elapsed))
        if key == "seconds":
            record["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        if record["status"] != "ok" or device == "meta":
            break
    print("RESULT " + json.dumps(record))
    """
)

def run_one(model: str, layers: int, exporter: str, timeout: float) -> dict[str, Any]:
    return run_script(_WORKER, [model, str(layers), exporter], {"model": model, "layers": layers, "exporter": exporter}, timeout)


def _faster(kept: dict[str, Any] | None, record: dict[str, Any]) -> dict[str, Any]:
    """Of two fresh-process runs of one row, the one whose first export was faster (with its
    phases and peak RSS), keeping the faster warm export of both and how many runs there were."""
    if kept is None:
        return {**record, "runs": 1}
    runs = kept["runs"] + 1
    if record.get("status") != "ok":
        return {**kept, "runs": runs}
    if kept.get("status") != "ok" or record["seconds"] < kept["seconds"]:
        kept, record = record, kept
    warm = [r["warm_seconds"] for r in (kept, record) if r.get("warm_seconds")]
    return {**kept, "runs": runs, **({"warm_seconds": min(warm)} if warm else {})}


def _runs_sentence(records: list[dict[str, Any]]) -> str:
    counts = sorted({r.get("runs", 1) for r in records})
    if counts == [1]:
        return ""
    return (
        f" A row measured with `--repeat` is the fastest of its fresh processes ({'/'.join(map(str, counts))} per row), "
        "run interleaved with the other rows: one process on this machine can take up to twice the time of the next."
    )


def _slope(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of log(seconds) against log(layers)."""
    points = [(x, y) for x, y in points if y > 0]
    if len(points) < 2:
        return None
    xs, ys = [math.log(x) for x, _ in points], [math.log(y) for _, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var else None


def _earlier_commits(machine: dict[str, Any], records: list[dict[str, Any]]) -> str:
    commits = sorted({r.get("commit", "?") for r in records} - {machine["commit"]})
    return "commits " + ", ".join(commits) if commits else "none"


def render(machine: dict[str, Any], records: list[dict[str, Any]]) -> str:
    lines = [
        "# Export time against depth",
        "",
        f"Generated by `python tools/benchmarks/depth_bench.py` on {describe_machine(machine)}, "
        f"{describe_versions(machine, ('torch', 'onnxscript', 'onnxruntime'))}, latest run at commit {machine['commit']}, "
        f"{machine['date']} (`{machine.get('command', 'python tools/benchmarks/depth_bench.py')}`); rows it did not measure "
        f"are from earlier runs ({_earlier_commits(machine, records)}). Each export runs in a fresh process, torch_onnx_fx's "
        "bytecode written beforehand, as pip writes an installed package's (an editable checkout under "
        "`PYTHONDONTWRITEBYTECODE=1` otherwise compiles it from source in each process, 0.2 s of every first "
        "export that no installed copy pays); *capture* is `torch.export.export` alone, "
        "the floor every exporter built on it pays. *post-capture* is torch_onnx_fx's time after capture "
        "(translate, optimize and the rest). Each process then exports the model twice more: the faster of "
        "those, in a table of its own, is what an export costs once the libraries are loaded. Peak RSS is the "
        "first export's. Models from small configs with random weights, sequence 16."
        + _runs_sentence(records),
        "",
    ]
    by_key = {(r["model"], r["layers"], r["exporter"]): r for r in records}
    for model in dict.fromkeys(r["model"] for r in records):
        depths = sorted({r["layers"] for r in records if r["model"] == model})
        lines += [f"## {model}", ""]
        lines += [
            "| layers | capture s | torch_onnx_fx s | ÷ capture | post-capture s | translate s | optimize s | nodes | torch.onnx s | ÷ capture | nodes | peak RSS MB (capture / ours / torch.onnx) |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        post: list[tuple[int, float]] = []
        capture_points: list[tuple[int, float]] = []
        for depth in depths:
            cap, ours, theirs = (by_key.get((model, depth, e), {}) for e in EXPORTERS)

            def seconds(r: dict[str, Any]) -> str:
                return f"{r['seconds']:.2f}" if r.get("status") == "ok" else (r.get("status") or "–")

            def ratio(r: dict[str, Any]) -> str:
                if r.get("status") == "ok" and cap.get("status") == "ok":
                    return f"{r['seconds'] / cap['seconds']:.2f}"
                return "–"

            phases = ours.get("phases", {})
            after = sum(v for k, v in phases.items() if k != "capture") if phases else None
            if after is not None:
                post.append((depth, after))
            if cap.get("status") == "ok":
                capture_points.append((depth, cap["seconds"]))
            lines.append(
                f"| {depth} | {seconds(cap)} | {seconds(ours)} | {ratio(ours)} | "
                f"{after:.2f} | {phases.get('translate', 0):.2f} | {phases.get('optimize', 0):.2f} | {ours.get('nodes', '–')} | "
                f"{seconds(theirs)} | {ratio(theirs)} | {theirs.get('nodes', '–')} | "
                f"{cap.get('peak_rss_mb', '–')} / {ours.get('peak_rss_mb', '–')} / {theirs.get('peak_rss_mb', '–')} |"
                if after is not None else
                f"| {depth} | {seconds(cap)} | {seconds(ours)} | {ratio(ours)} | – | – | – | – | {seconds(theirs)} | {ratio(theirs)} | – | – |"
            )
        slope_post, slope_capture = _slope(post), _slope(capture_points)
        if slope_post is not None and slope_capture is not None:
            lines += ["", f"Log-log slope against layers: post-capture {slope_post:.2f}, capture {slope_capture:.2f}."]
        warm = [(depth, [by_key.get((model, depth, e), {}).get("warm_seconds") for e in EXPORTERS]) for depth in depths]
        warm = [(depth, times) for depth, times in warm if times[0] and times[1]]
        if warm:
            lines += [
                "",
                "Later exports of the same model in the same process (imports and registries already loaded; the faster of two):",
                "",
                "| layers | capture s | torch_onnx_fx s | ÷ capture | torch.onnx s | ÷ capture |",
                "|---:|---:|---:|---:|---:|---:|",
            ]
            for depth, (cap_s, ours_s, theirs_s) in warm:
                theirs = f"{theirs_s:.2f} | {theirs_s / cap_s:.2f}" if theirs_s else "– | –"
                lines.append(f"| {depth} | {cap_s:.2f} | {ours_s:.2f} | {ours_s / cap_s:.2f} | {theirs} |")
        failed = [r for r in records if r["model"] == model and r.get("status") != "ok"]
        for r in failed:
            lines.append(f"- {r['exporter']} at {r['layers']} layers: {r.get('status')} {r.get('error', '')}")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="llama,bert")
    parser.add_argument("--layers", default="2,4,8,16,32,64")
    parser.add_argument("--exporters", default=",".join(EXPORTERS))
    parser.add_argument("--meta8b", action="store_true", help="also the 32-layer Llama-3-8B shape on meta")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument(
        "--repeat", type=int, default=1,
        help="fresh processes per row, interleaved; each row keeps the fastest (one sample on this 2-core machine moves by up to 2x)",
    )
    parser.add_argument("--render-only", action="store_true")
    options = parser.parse_args(argv)
    if not options.render_only:
        machine = machine_info(" ".join(["python", "tools/benchmarks/depth_bench.py", *(argv or sys.argv[1:])]))
        jobs = [(m, int(n)) for m in options.models.split(",") if m for n in options.layers.split(",") if n]
        if options.meta8b:
            jobs.append(("meta8b", 32))
        fastest: dict[tuple[str, int, str], dict[str, Any]] = {}
        for _ in range(options.repeat):
            for model, layers in jobs:
                for exporter in options.exporters.split(","):
                    record = run_one(model, layers, exporter, options.timeout)
                    print(json.dumps(record), flush=True)
                    fastest[(model, layers, exporter)] = _faster(fastest.get((model, layers, exporter)), record)
        records = list(fastest.values())
        # A run that measures some (model, depth, exporter) keeps the earlier runs' other rows; each
        # row says which commit measured it.
        merge_results(RESULTS, machine, records, ("model", "layers", "exporter"))
    machine, records = read_results(RESULTS)
    PAGE.write_text(render(machine, records))
    print(f"wrote {PAGE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
