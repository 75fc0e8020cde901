"""The bundled example: a small transformer-style classifier exported with a dynamic batch."""

from __future__ import annotations

import tempfile
import time

import torch

__all__ = ["DemoModel", "run_demo"]


class DemoModel(torch.nn.Module):
    """Embedding, one attention block with layer norm and GELU MLP, and a classifier head."""

    def __init__(self, vocab: int = 100, dim: int = 32, heads: int = 4, classes: int = 5):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.attention = torch.nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm1 = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))
        self.norm2 = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        attended, _ = self.attention(x, x, x, need_weights=False)
        x = self.norm1(x + attended)
        x = self.norm2(x + self.mlp(x))
        return self.head(x.mean(dim=1)).softmax(-1)


def run_demo() -> int:
    import torch_onnx_fx

    torch.manual_seed(0)
    model = DemoModel().eval()
    tokens = torch.randint(0, 100, (2, 16))
    start = time.perf_counter()
    program = torch_onnx_fx.export(
        model, (tokens,), dynamic_shapes=({0: "batch", 1: "sequence"},), verbose=False
    )
    seconds = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as folder:
        path = f"{folder}/demo.onnx"
        program.save(path)
        import os

        size = os.path.getsize(path) + (os.path.getsize(path + ".data") if os.path.exists(path + ".data") else 0)
    worst = 0.0
    for batch, length in [(2, 16), (3, 7)]:
        sample = torch.randint(0, 100, (batch, length))
        with torch.no_grad():
            expected = model(sample)
        (actual,) = program(sample)
        worst = max(worst, float((expected - actual).abs().max()))
    inputs = ", ".join(f"{v.name}[{', '.join(str(d) for d in v.shape)}]" for v in program.model.graph.inputs)
    print(f"exported DemoModel in {seconds:.2f} s: {len(program.model.graph)} ONNX nodes, {size / 1024:.0f} KiB")
    print(f"inputs: {inputs}")
    print(f"ONNX Runtime vs eager PyTorch on batch 2x16 and 3x7: max abs diff {worst:.2e}")
    ok = worst < 1e-4
    print("demo: OK" if ok else "demo: MISMATCH")
    return 0 if ok else 1
