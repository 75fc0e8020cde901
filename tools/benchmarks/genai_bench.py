"""Generation speed in ONNX Runtime GenAI: float32 folders of one Llama, ours beside GenAI's builder's.

The ~60 M-parameter Llama of ``weight_only_bench.py`` (hidden 768, 8 layers, random weights) is
exported by ``export_for_genai`` three ways:

- ``standard``: the default (standard ONNX operators, the cache concatenated each step);
- ``onnxruntime``: ``opset_version=23, fusion="onnxruntime"`` (fused norms and rotary
  embeddings; the attention stays standard, as the graph lets batch and new positions vary);
- ``onnxruntime, shared buffer``: the same with ``shared_buffer=True`` (every layer's attention a
  ``GroupQueryAttention`` writing into GenAI's one cache buffer per layer, in place).

``--builder FOLDER`` adds the folder ONNX Runtime GenAI's own model builder made of the same
weights (``genai_int4_bench.py --save-float SRC`` writes them; then ``python -m
onnxruntime_genai.models.builder -i SRC -o FOLDER -p fp32 -e cpu``), which shares its buffer too.
GenAI generates ``--tokens`` tokens greedily after a 16-token prompt from each folder, alternating
folders ``--rounds`` times, at each intra-op thread count. Reported: tokens per second of the
generation loop (the prompt's step excluded), median over rounds, the ratio to the builder's
folder (to ``standard`` without one), and whether the folder's tokens are eager ``generate``'s.

    python tools/benchmarks/genai_bench.py [--tokens 256] [--rounds 5] [--threads 1,2] [--builder FOLDER]

Results: ``tools/results/genai.jsonl``, merged by (variant, threads).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools._common import describe_machine, describe_versions, machine_info, merge_results, write_section  # noqa: E402
from tools.benchmarks import weight_only_bench  # noqa: E402
from tools.benchmarks.genai_int4_bench import PROMPT, _configure, _generate, _greedy, _interleaved  # noqa: E402

RESULTS = REPO / "tools" / "results" / "genai.jsonl"
PAGE = REPO / "docs" / "genai.md"
START, END = "<!-- genai-bench:start -->", "<!-- genai-bench:end -->"
BUILDER = "GenAI builder fp32"
VARIANTS = {
    "standard": {},
    "onnxruntime": {"opset_version": 23, "fusion": "onnxruntime"},
    "onnxruntime, shared buffer": {"opset_version": 23, "fusion": "onnxruntime", "shared_buffer": True},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--builder", type=Path, help="a folder GenAI's model builder made of the same float32 weights")
    options = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import onnxruntime_genai as og
    import torch

    from torch_onnx_fx.integrations.genai import export_for_genai

    torch.manual_seed(0)
    model = weight_only_bench._model()
    prompt = torch.randint(3, 32000, (1, PROMPT), generator=torch.Generator().manual_seed(1))
    expected, unused = _greedy(model, prompt, options.tokens)
    model.generation_config.eos_token_id = unused
    header = machine_info("python tools/benchmarks/genai_bench.py " + " ".join(sys.argv[1:] if argv is None else argv))
    header["onnxruntime_genai"] = og.__version__
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        folders = {name: Path(export_for_genai(model, Path(scratch) / str(i), **kwargs)) for i, (name, kwargs) in enumerate(VARIANTS.items())}
        if options.builder:
            folders[BUILDER] = options.builder
        base_name = BUILDER if options.builder else "standard"
        for threads in (int(t) for t in options.threads.split(",")):
            models = {}
            for variant, folder in folders.items():
                _configure(folder, threads, unused)
                models[variant] = og.Model(str(folder))
            same = {variant: _generate(og, m, prompt, options.tokens)[0] == expected for variant, m in models.items()}
            rates = _interleaved(og, models, prompt, options.tokens, options.rounds)
            for variant in models:
                rate = rates[variant]
                base = rates[base_name]
                records.append({
                    "variant": variant, "threads": threads, "tokens": options.tokens, "tokens_per_s": round(rate, 1),
                    "ratio": round(rate / base, 2), "base": base_name, "tokens_equal_eager": same[variant],
                })
    records = merge_results(RESULTS, header, records, key=("variant", "threads"))
    section = render(header, records)
    print(section)
    write_section(PAGE, START, END, section)
    return 0


def render(header: dict[str, Any], records: list[dict[str, Any]]) -> str:
    """The page's table, between its markers."""
    commits = sorted({r["commit"] for r in records})
    lines = [
        START, "",
        f"Generated by `python tools/benchmarks/genai_bench.py` on {describe_machine(header)}, "
        f"{describe_versions(header, ('torch', 'onnxruntime'))}, onnxruntime-genai {header.get('onnxruntime_genai', '?')}, commit {', '.join(commits)}, {header['date']}. "
        "The ~60 M-parameter Llama of `weight_only_bench.py` (hidden 768, 8 layers, random weights), float32; 256 "
        "tokens generated greedily after a 16-token prompt, folders alternating, median of 5 rounds; the prompt's step "
        "is not timed. *ratio*: tokens per second over the GenAI model builder's folder of the same weights "
        "(`-p fp32 -e cpu`, shared buffer).",
        "",
        "| folder | threads | tokens/s | ratio | greedy tokens equal eager's |",
        "|---|---:|---:|---:|---|",
    ]
    for r in sorted(records, key=lambda r: (r["threads"], list(VARIANTS).index(r["variant"]) if r["variant"] in VARIANTS else 9)):
        lines.append(f"| {r['variant']} | {r['threads']} | {r['tokens_per_s']:.1f} | {r['ratio']:.2f} | {'yes' if r['tokens_equal_eager'] else 'no'} |")
    return "\n".join(lines + ["", END])


if __name__ == "__main__":
    sys.exit(main())
