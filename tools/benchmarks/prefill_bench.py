"""The prompt step of a decoder LLM in ONNX Runtime: torch_onnx_fx's graphs beside torch.onnx's.

The 20 M-parameter Llama of ``decode_bench.py`` reads a whole prompt (batch 1, ``--lengths``
tokens, no cache) and returns its logits. It is exported with a dynamic length by
``torch.onnx.export(dynamo=True)`` and by ``torch_onnx_fx.export`` at opsets 20 and 23, each also
with ``fusion="onnxruntime"``; with ``--mobius``, the graph ONNX Runtime's model builder writes for
the same weights runs beside them, given an empty cache. The graphs run interleaved call by call
in one process (``decode_bench.time_interleaved``); every graph's logits are compared with eager
PyTorch first.

    python tools/benchmarks/prefill_bench.py [--lengths 128,512] [--calls 20] [--threads 1] [--mobius]

Results: ``tools/results/prefill.jsonl`` (one line per run and variant).
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

from tools._common import machine_info  # noqa: E402
from tools.benchmarks import decode_bench  # noqa: E402

RESULTS = REPO / "tools" / "results" / "prefill.jsonl"


def _prompt_step(model: Any) -> Any:
    """The model over a prompt: (input_ids, attention_mask) -> logits, no cache kept."""
    import torch

    class Prompt(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits

    return Prompt().eval()


def _inputs(length: int, vocabulary: int) -> tuple[Any, Any]:
    import torch

    ids = torch.randint(3, vocabulary, (1, length), generator=torch.Generator().manual_seed(length))
    return ids, torch.ones(1, length, dtype=torch.int64)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="128,512", help="prompt lengths to time, comma-separated")
    parser.add_argument("--calls", type=int, default=20, help="timed calls per graph and length")
    parser.add_argument("--threads", type=int, default=1, help="ONNX Runtime intra-op threads")
    parser.add_argument("--mobius", action="store_true", help="time mobius's graph too (needs mobius-onnx)")
    parser.add_argument("--json", type=Path, default=RESULTS)
    options = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import numpy as np
    import torch

    torch.manual_seed(0)
    model = decode_bench._model()
    prompt = _prompt_step(model)
    config = model.config
    lengths = [int(n) for n in options.lengths.split(",")]
    dim = torch.export.Dim("length", min=2, max=4096)
    shapes = ({1: dim}, {1: dim})
    header = machine_info("python tools/benchmarks/prefill_bench.py " + " ".join(sys.argv[1:] if argv is None else argv))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        nodes, sessions = decode_bench.export_graphs(model, prompt, _inputs(16, config.vocab_size), shapes, Path(scratch), options)
        head_size = config.hidden_size // config.num_attention_heads
        empty = np.zeros((1, config.num_key_value_heads, 0, head_size), dtype=np.float32)
        for length in lengths:
            ids, mask = _inputs(length, config.vocab_size)
            with torch.no_grad():
                expected = prompt(ids, mask).numpy()
            feeds = {}
            for variant, session in sessions.items():
                names = [i.name for i in session.get_inputs()]
                # mobius's graph takes the (empty) cache after the ids and mask.
                feeds[variant] = {name: array for name, array in zip(names, [ids.numpy(), mask.numpy()])}
                feeds[variant].update({name: empty for name in names[2:]})
            rows += decode_bench.timed_rows(
                {**header, "length": length, "threads": options.threads}, sessions, feeds, expected, nodes, options.calls,
            )
    decode_bench.report(rows, "length", "prompt", options.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
