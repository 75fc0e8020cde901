"""Generation speed in ONNX Runtime GenAI: a Llama's float32 export beside its torchao int4 one.

The ~60 M-parameter Llama of ``weight_only_bench.py`` (hidden 768, 8 layers, random weights) is
exported by ``export_for_genai`` as it is (float32, default opset) and after
``quantize_(model, IntxWeightOnlyConfig(torch.int4, PerGroup(32)))`` with ``opset_version=21,
fusion="onnxruntime"`` (every product a ``MatMulNBits`` at accuracy level 1), and once more with
``shared_buffer=True`` (GenAI's shared cache buffer, as its model builder's int4 folders). GenAI then
generates ``--tokens`` tokens greedily after a 16-token prompt from each folder, alternating
folders ``--rounds`` times, at the intra-op thread counts given. Reported: tokens per second of
the generation loop (the prompt's step excluded), median over rounds, and the ratio int4 / float32.
Whether the int4 folders' tokens equal the torchao model's own greedy ones is checked first.

    python tools/benchmarks/genai_int4_bench.py [--tokens 128] [--rounds 5] [--threads 1,2] [--builder FOLDER]

``--builder FOLDER`` adds, for comparison, the folder ONNX Runtime GenAI's own model builder made
of the same float32 weights (``--save-float FOLDER`` writes them, with a stand-in tokenizer, for
``python -m onnxruntime_genai.models.builder -i FOLDER -o OUT -p int4 -e cpu``): its own
round-to-nearest int4 with block 32, accuracy level 4 (int8 activations), fused attention.

Results: ``tools/results/genai_int4.jsonl``, merged by (variant, threads).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools._common import machine_info, merge_results  # noqa: E402
from tools.benchmarks import weight_only_bench  # noqa: E402

RESULTS = REPO / "tools" / "results" / "genai_int4.jsonl"
SHARED = "int4 MatMulNBits, shared buffer"
PROMPT = 16


def _configure(folder: Path, threads: int, end: int) -> None:
    """Set GenAI's intra-op thread count and end token in the folder's config (an end token the
    models never produce: every run generates all the tokens asked for)."""
    path = folder / "genai_config.json"
    config = json.loads(path.read_text())
    options = config["model"]["decoder"].setdefault("session_options", {})
    options["intra_op_num_threads"] = threads
    config["model"]["eos_token_id"] = end
    path.write_text(json.dumps(config, indent=2))


def _generate(og: Any, model: Any, prompt: Any, tokens: int) -> tuple[list[int], float]:
    """Greedy tokens after ``prompt`` and the loop's tokens per second (prompt step excluded)."""
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=prompt.shape[1] + tokens, do_sample=False, batch_size=1)
    generator = og.Generator(model, params)
    generator.append_tokens(prompt.numpy())
    generator.generate_next_token()
    start = time.perf_counter()
    produced = 1
    while not generator.is_done():
        generator.generate_next_token()
        produced += 1
    elapsed = time.perf_counter() - start
    return [int(t) for t in generator.get_sequence(0)], (produced - 1) / elapsed


def _greedy(model: Any, prompt: Any, tokens: int) -> tuple[list[int], int]:
    """Eager ``generate``'s greedy tokens after ``prompt``, and an end token they never hold (set
    as the model's, so that every run generates all the tokens asked for)."""
    import torch

    with torch.no_grad():
        expected = model.generate(
            input_ids=prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=tokens, do_sample=False,
            eos_token_id=None, pad_token_id=0,
        )[0].tolist()
    return expected, next(t for t in range(3, 32000) if t not in expected)


def _interleaved(og: Any, models: dict[str, Any], prompt: Any, tokens: int, rounds: int) -> dict[str, float]:
    """Each model's median tokens per second over ``rounds``, the models alternating."""
    rates: dict[str, list[float]] = {v: [] for v in models}
    for _ in range(rounds):
        for variant, model in models.items():
            rates[variant].append(_generate(og, model, prompt, tokens)[1])
    return {variant: statistics.median(r) for variant, r in rates.items()}


def _save_float(model: Any, folder: Path) -> None:
    """The float32 model as a transformers folder, with a word-level stand-in tokenizer (the
    builder requires one; generation here feeds token ids)."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    model.save_pretrained(folder)
    vocabulary = {f"t{i}": i for i in range(model.config.vocab_size)}
    tokenizer = Tokenizer(models.WordLevel(vocabulary, unk_token="t0"))
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="t0", bos_token="t1", eos_token="t2", pad_token="t0").save_pretrained(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--builder", type=Path, help="a folder GenAI's model builder made of --save-float's weights")
    parser.add_argument("--save-float", type=Path, help="write the float32 model (and a stand-in tokenizer) there and stop")
    options = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import onnxruntime_genai as og
    import torch

    from torch_onnx_fx.integrations.genai import export_for_genai

    torch.manual_seed(0)
    float_model = weight_only_bench._model()
    if options.save_float:
        _save_float(float_model, options.save_float)
        return 0
    int4_model = weight_only_bench._quantized(float_model)
    prompt = torch.randint(3, 32000, (1, PROMPT), generator=torch.Generator().manual_seed(1))
    expected, unused = _greedy(int4_model, prompt, options.tokens)
    for model in (float_model, int4_model):
        model.generation_config.eos_token_id = unused
    header = machine_info("python tools/benchmarks/genai_int4_bench.py " + " ".join(sys.argv[1:] if argv is None else argv))
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        folders = {
            "float32": Path(export_for_genai(float_model, Path(scratch) / "float32")),
            "int4 MatMulNBits": Path(export_for_genai(int4_model, Path(scratch) / "int4", opset_version=21, fusion="onnxruntime")),
            SHARED: Path(export_for_genai(int4_model, Path(scratch) / "int4-shared", opset_version=21, fusion="onnxruntime", shared_buffer=True)),
        }
        if options.builder:
            folders["GenAI builder int4 (level 4)"] = options.builder
        for threads in (int(t) for t in options.threads.split(",")):
            models = {}
            for variant, folder in folders.items():
                _configure(folder, threads, unused)
                models[variant] = og.Model(str(folder))
            same = {v: _generate(og, models[v], prompt, options.tokens)[0] == expected for v in ("int4 MatMulNBits", SHARED)}
            rates = _interleaved(og, models, prompt, options.tokens, options.rounds)
            base = rates["float32"]
            for variant in models:
                rate = rates[variant]
                records.append({
                    "variant": variant, "threads": threads, "tokens": options.tokens, "tokens_per_s": round(rate, 1),
                    "ratio": round(rate / base, 2), "tokens_equal_torchao": same.get(variant),
                })
    records = merge_results(RESULTS, header, records, key=("variant", "threads"))
    print("| folder | threads | tokens/s | ratio to float32 | greedy tokens equal torchao's |")
    print("|---|---:|---:|---:|---|")
    for r in records:
        equal = "—" if r["tokens_equal_torchao"] is None else ("yes" if r["tokens_equal_torchao"] else "no")
        print(f"| {r['variant']} | {r['threads']} | {r['tokens_per_s']:.1f} | {r['ratio']:.2f} | {equal} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
