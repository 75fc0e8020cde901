"""PT2E int8 models in ONNX Runtime: accuracy against the converted PyTorch model and latency
against the float32 export, side by side with torch.onnx.

    python tools/benchmarks/quant_bench.py                           # every model and quantizer
    python tools/benchmarks/quant_bench.py --models resnet50 --quantizers x86

Each (model, quantizer) runs in a fresh process. The model is built from its transformers config
with random weights (ResNet-50 and MobileNetV2 at 224x224, batch 1; BERT with 4 layers of
hidden 768, sequence 128 and 16 labels, as two logits would make the output range one
difference), quantized with torchao's PT2E (``prepare_pt2e``, 4 random calibration batches,
``convert_pt2e``) and exported by torch_onnx_fx (float32 and int8) and by
``torch.onnx.export(dynamo=True)`` (int8). Every ONNX model runs with ONNX Runtime's default
session options, the ones a user gets. Recorded:

- ``rel_diff``: the largest difference from the converted PyTorch model, over its output range;
- ``steps``: the largest difference, in quantization steps, of any quantized tensor of
  torch_onnx_fx's model from PyTorch's (each QuantizeLinear output exposed as a graph output),
  and ``first_step_at`` the first such tensor that differs, with how many of its elements do
  (a padded tensor whose zero padding moved into the convolution reading it is left out);
- latency: median of 30 runs at 1 and 2 intra-op threads, the three models interleaved (worker
  threads do not spin between runs, so that one session's idle threads do not slow the next).

Results: ``tools/results/quant.jsonl``; page: ``docs/quantization.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tools._common import REPO, describe_machine, describe_versions, machine_info, merge_results, read_results, replace_section, run_script  # noqa: E402

RESULTS = REPO / "tools" / "results" / "quant.jsonl"
PAGE = REPO / "docs" / "quantization.md"
START, END = "<!-- quant-bench:start -->", "<!-- quant-bench:end -->"
MODELS = ("resnet50", "mobilenet_v2", "bert")
QUANTIZERS = ("x86", "xnnpack", "x86_dynamic")

_WORKER = textwrap.dedent(
    """
    import json, statistics, sys, time, warnings, tempfile, os
    warnings.filterwarnings("ignore")
    import numpy as np, onnxruntime as ort, torch, transformers, onnx_ir as ir
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    import torch_onnx_fx
    from torch_onnx_fx.translate.metadata import INTEGER_OFFSET_KEY

    model_name, quantizer_name = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    if model_name == "resnet50":
        net, x = transformers.ResNetForImageClassification(transformers.ResNetConfig()), torch.randn(1, 3, 224, 224)
    elif model_name == "mobilenet_v2":
        net, x = transformers.MobileNetV2ForImageClassification(transformers.MobileNetV2Config()), torch.randn(1, 3, 224, 224)
    else:
        config = transformers.BertConfig(num_hidden_layers=4, num_labels=16)
        net, x = transformers.BertForSequenceClassification(config), torch.randint(0, config.vocab_size, (1, 128))

    class Logits(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner
        def forward(self, x):
            return self.inner(x).logits

    model = Logits(net.eval()).eval()
    def sample():
        return torch.randn_like(x) if x.is_floating_point() else torch.randint_like(x, 0, 30000)

    if quantizer_name == "xnnpack":
        import torchao.testing.pt2e._xnnpack_quantizer as xnnpack
        quantizer = xnnpack.XNNPACKQuantizer()
        quantizer.set_global(xnnpack.get_symmetric_quantization_config(is_per_channel=True))
    else:
        import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as x86
        quantizer = x86.X86InductorQuantizer()
        quantizer.set_global(x86.get_default_x86_inductor_quantization_config(is_dynamic=quantizer_name == "x86_dynamic"))
    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    with torch.no_grad():
        for _ in range(4):
            prepared(sample())
    converted = convert_pt2e(prepared)
    with torch.no_grad():
        expected = converted(x).numpy()
    record = {"model": model_name, "quantizer": quantizer_name}
    folder = tempfile.mkdtemp()
    paths = {}

    def export(key, exporter, module):
        start = time.perf_counter()
        try:
            if exporter == "ours":
                program = torch_onnx_fx.export(module, (x,), dynamo=True, verbose=False)
            else:
                program = torch.onnx.export(module, (x,), dynamo=True, verbose=False)
            path = os.path.join(folder, key + ".onnx")
            program.save(path)
            paths[key] = path
            record[key + "_export_s"] = round(time.perf_counter() - start, 2)
            return program
        except Exception as exc:  # noqa: BLE001 - recorded
            record[key + "_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
            return None

    export("float32", "ours", model)
    ours = export("int8", "ours", converted)
    export("int8_torch_onnx", "torch.onnx", converted)

    def session(path, threads):
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        # Interleaved sessions: a finished run's spinning worker would take the core the next
        # session's run needs.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    feed_of = lambda s: {s.get_inputs()[0].name: x.numpy()}
    span = float(expected.max() - expected.min()) or 1.0
    for key in ("int8", "int8_torch_onnx"):
        if key in paths:
            s = session(paths[key], 2)
            got = s.run(None, feed_of(s))[0]
            record[key + "_rel_diff"] = float(np.abs(got - expected).max() / span)
            record[key + "_argmax_same"] = bool((got.argmax(-1) == expected.argmax(-1)).all())
            try:
                so = ort.SessionOptions()
                so.optimized_model_filepath = paths[key] + ".opt"
                ort.InferenceSession(paths[key], so, providers=["CPUExecutionProvider"])
                import onnx, collections
                ops = collections.Counter(n.op_type for n in onnx.load(paths[key] + ".opt").graph.node)
                record[key + "_integer_ops"] = sum(v for k, v in ops.items() if k.startswith(("QLinear", "QGemm", "MatMulInteger", "ConvInteger", "DynamicQuantize")))
                record[key + "_float_ops"] = sum(v for k, v in ops.items() if k in ("Conv", "FusedConv", "Gemm", "MatMul", "FusedMatMul", "FusedGemm"))
            except Exception as exc:  # noqa: BLE001 - recorded
                record[key + "_ops_error"] = str(exc)[:160]

    # Every quantized tensor of our model against PyTorch's, in steps: the QuantizeLinear
    # outputs exposed, matched to PyTorch's quantize nodes by name: the export names a value after
    # the node of torch.export's graph, which holds the converted model's quantize nodes in the
    # same order under its own names. A quantize the export merged with an equal one (the same
    # tensor quantized again after its padding moved into the convolution) has no value of its own.
    if ours is not None:
        torch_values = []
        def is_quantize(node):
            return node.op == "call_function" and "quantized_decomposed.quantize_per_tensor" in str(node.target)
        class Recorder(torch.fx.Interpreter):
            def run_node(self, node):
                result = super().run_node(node)
                if is_quantize(node):
                    torch_values.append((node.name, result))
                return result
        with torch.no_grad():
            Recorder(converted).run(x)
        model_ir = ir.load(paths["int8"])
        # A quantized tensor: QuantizeLinear's output, the Clip after it (a narrowed range), or
        # the Cast ending PyTorch's arithmetic (tensor parameters); not a zero point's Cast.
        def quantized(n):
            if n.outputs[0].dtype not in (ir.DataType.UINT8, ir.DataType.INT8):
                return False
            source = n.inputs[0]
            if n.op_type == "QuantizeLinear":
                return True
            if n.op_type == "Clip":
                return source.producer() is not None and source.producer().op_type == "QuantizeLinear"
            return n.op_type == "Cast" and source.dtype == ir.DataType.FLOAT
        outputs = [n.outputs[0] for n in model_ir.graph if quantized(n)]
        outputs = [v for v in outputs if not any(u.op_type == "Clip" for u, _ in v.uses())]
        exported_names = [n.name for n in torch.export.export(converted, (x,)).graph.nodes if is_quantize(n)]
        by_name = {v.name: v for v in outputs}
        if len(exported_names) != len(torch_values):
            exported_names = []
        pairs = [(by_name.get(exported), name, value) for exported, (name, value) in zip(exported_names, torch_values)]
        pairs = [pair for pair in pairs if pair[0] is not None]
        if pairs:
            for v, _, _ in pairs:
                if v not in model_ir.graph.outputs:
                    model_ir.graph.outputs.append(v)
            exposed = os.path.join(folder, "exposed.onnx")
            ir.save(model_ir, exposed)
            s = session(exposed, 2)
            got = dict(zip([o.name for o in s.get_outputs()], s.run(None, feed_of(s))))
            worst, first, moved = 0, None, 0
            for v, name, value in pairs:
                if got[v.name].shape != tuple(value.shape):
                    # A padded tensor whose zero padding moved into the convolution reading it.
                    moved += 1
                    continue
                # An int8 activation the export stored as uint8 says by how much it is shifted.
                ours = got[v.name].astype(np.int32) - int(v.metadata_props.get(INTEGER_OFFSET_KEY, 0))
                d = np.abs(ours - value.numpy().astype(np.int32))
                worst = max(worst, int(d.max()))
                if first is None and d.max() > 0:
                    first = f"{name}: {int((d > 0).sum())} of {d.size} elements, {int(d.max())} step(s)"
            record["steps"], record["first_step_at"], record["quantized_tensors"] = worst, first, len(pairs)
            record["padding_moved"], record["merged"] = moved, len(torch_values) - len(pairs)
        else:
            record["steps_error"] = f"{len(outputs)} quantized ONNX tensors vs {len(torch_values)} in PyTorch"

    for threads in (1, 2):
        sessions = {k: session(p, threads) for k, p in paths.items()}
        for s in sessions.values():
            for _ in range(5):
                s.run(None, feed_of(s))
        times = {k: [] for k in sessions}
        for _ in range(30):
            for k, s in sessions.items():
                start = time.perf_counter()
                s.run(None, feed_of(s))
                times[k].append(time.perf_counter() - start)
        for k, t in times.items():
            record[f"{k}_ms_{threads}t"] = round(statistics.median(t) * 1e3, 3)
    print("RESULT " + json.dumps(record))
    """
)


def run_one(model: str, quantizer: str, timeout: float) -> dict[str, Any]:
    return run_script(_WORKER, [model, quantizer], {"model": model, "quantizer": quantizer}, timeout)


def _ratio(record: dict[str, Any], key: str, threads: int) -> str:
    base, value = record.get(f"float32_ms_{threads}t"), record.get(f"{key}_ms_{threads}t")
    return f"{value / base:.2f}" if base and value else "—"


def render(machine: dict[str, Any], records: list[dict[str, Any]]) -> str:
    lines = [
        START,
        f"Generated by `python tools/benchmarks/quant_bench.py` on {describe_machine(machine)}, "
        f"{describe_versions(machine, ('torch', 'onnxscript', 'onnxruntime'))}, commit {machine['commit']}, {machine['date']}. "
        "Latency is a ratio to torch_onnx_fx's float32 export of the same model (lower is faster); "
        "differences are over the converted PyTorch model's output range; ORT's default session options.",
        "",
        "| model | quantizer | int8 / float32, 1 thread | 2 threads | torch.onnx int8 / float32, 1 thread | 2 threads "
        "| integer kernels (float ones left) | difference | torch.onnx difference | largest step difference |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    def order(record: dict[str, Any]) -> tuple[int, int]:
        # Rows merged from several runs, in the order the benchmark lists its cases.
        def rank(names: tuple[str, ...], name: str) -> int:
            return names.index(name) if name in names else len(names)

        return rank(MODELS, record["model"]), rank(QUANTIZERS, record["quantizer"])

    for r in sorted(records, key=order):
        def diff(key: str, r: dict[str, Any] = r) -> str:
            if f"{key}_error" in r:
                return "fails: " + r[f"{key}_error"].split(":")[0]
            value = r.get(f"{key}_rel_diff")
            return "—" if value is None else f"{value:.1e}"
        kernels = f"{r.get('int8_integer_ops', '—')} ({r.get('int8_float_ops', '—')})"
        steps = r.get("steps")
        step_text = "—" if steps is None else (f"{steps} (first: {r['first_step_at']})" if r.get("first_step_at") else "0")
        lines.append(
            f"| {r['model']} | {r['quantizer']} | {_ratio(r, 'int8', 1)} | {_ratio(r, 'int8', 2)} "
            f"| {_ratio(r, 'int8_torch_onnx', 1)} | {_ratio(r, 'int8_torch_onnx', 2)} | {kernels} "
            f"| {diff('int8')} | {diff('int8_torch_onnx')} | {step_text} |"
        )
    lines.append(END)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--quantizers", default=",".join(QUANTIZERS))
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--render-only", action="store_true")
    args = parser.parse_args()
    machine, records = read_results(RESULTS)
    if not args.render_only:
        machine = machine_info("python tools/benchmarks/quant_bench.py " + " ".join(sys.argv[1:]))
        fresh = []
        for model in args.models.split(","):
            for quantizer in args.quantizers.split(","):
                record = run_one(model, quantizer, args.timeout)
                print(json.dumps(record), flush=True)
                fresh.append(record)
        # A run of some models and quantizers keeps the other rows of earlier runs.
        records = merge_results(RESULTS, machine, fresh, ("model", "quantizer"))
    text = PAGE.read_text()
    updated = replace_section(text, START, END, render(machine, records))
    if updated is None:
        raise SystemExit(f"{PAGE} lacks the {START} / {END} markers")
    PAGE.write_text(updated)
    print(f"wrote {PAGE.relative_to(REPO)}")


if __name__ == "__main__":
    main()
