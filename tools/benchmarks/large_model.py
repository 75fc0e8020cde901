"""A model above protobuf's 2 GiB, end to end: export, save with external data, load, run, compare.

    python tools/benchmarks/large_model.py                      # 10 x Linear(8192, 8192): 2.5 GiB of float32
    python tools/benchmarks/large_model.py --layers 2 --width 1024 --out /tmp/large   # a quick smoke run

Measured in one process, resident memory sampled every 5 ms by a thread reading /proc:
the baseline before the model is built (interpreter and libraries), the peak while exporting and
the peak while saving. The save target is that its peak, less the baseline, stays within 1.2 x the
weight bytes: writing external data streams the tensors the model already holds and copies none.
The saved files are then checked (onnx.checker with the external data), opened by ONNX Runtime
from disk and compared with eager PyTorch. One JSON line goes to ``tools/results/large_model.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools._common import machine_info  # noqa: E402

__all__ = ["RssSampler", "run", "main"]

_PAGE = 4096


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * _PAGE


class RssSampler:
    """The peak resident set size while the ``with`` block runs (a thread samples /proc)."""

    def __init__(self, interval: float = 0.005):
        self.interval, self.peak = interval, 0
        self._stop = threading.Event()

    def __enter__(self) -> "RssSampler":
        self.peak = _rss()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())


def _layers(width: int, layers: int) -> Iterator[Any]:
    import torch

    for _ in range(layers):
        yield torch.nn.Linear(width, width)
        yield torch.nn.ReLU()


def run(layers: int, width: int, folder: Path) -> dict[str, Any]:
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch

    import torch_onnx_fx

    gib = 1024**3
    # A first tiny export loads what export loads lazily (torchlib, the optimizer's rules), so
    # the baseline is the libraries' memory and the rest is the model's.
    torch_onnx_fx.export(torch.nn.Linear(2, 2).eval(), (torch.randn(1, 2),), verbose=False)
    baseline = _rss()
    torch.manual_seed(0)
    with torch.no_grad():
        model = torch.nn.Sequential(*_layers(width, layers)).eval()
        for module in model:
            if isinstance(module, torch.nn.Linear):
                module.weight.mul_(1.0 / width**0.5 * 2)  # keep activations O(1) through the depth
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    x = torch.randn(2, width)
    with torch.no_grad():
        expected = model(x)

    start = time.perf_counter()
    with RssSampler() as exporting:
        program = torch_onnx_fx.export(model, (x,), verbose=False)
    export_s = time.perf_counter() - start

    path = folder / "large.onnx"
    start = time.perf_counter()
    with RssSampler() as saving:
        program.save(path, external_data=True)
    save_s = time.perf_counter() - start
    del program

    onnx.checker.check_model(str(path), full_check=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (actual,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    difference = float(np.abs(actual - expected.numpy()).max())
    return {
        "layers": layers, "width": width,
        "weight_gib": round(weight_bytes / gib, 3),
        "model_file_bytes": path.stat().st_size,
        "data_file_gib": round(path.with_name("large.onnx.data").stat().st_size / gib, 3),
        "baseline_rss_gib": round(baseline / gib, 3),
        "export_peak_rss_gib": round(exporting.peak / gib, 3),
        "save_peak_rss_gib": round(saving.peak / gib, 3),
        "save_peak_over_weights": round((saving.peak - baseline) / weight_bytes, 3),
        "export_s": round(export_s, 2), "save_s": round(save_s, 2),
        "max_abs_diff": difference,
        "matches_eager": difference <= 1e-3,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=10)
    parser.add_argument("--width", type=int, default=8192)
    parser.add_argument("--out", type=Path, help="folder for the files (default: a temporary one, removed after)")
    parser.add_argument("--json", type=Path, default=REPO / "tools" / "results" / "large_model.jsonl")
    args = parser.parse_args(argv)
    folder = args.out or Path(tempfile.mkdtemp(prefix="large_model."))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        result = run(args.layers, args.width, folder)
    finally:
        if args.out is None:
            shutil.rmtree(folder, ignore_errors=True)
    line = {**machine_info("python tools/benchmarks/large_model.py " + " ".join(argv or sys.argv[1:])), **result}
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        with open(args.json, "a") as out:
            out.write(json.dumps(line) + "\n")
    return 0 if result["matches_eager"] and result["save_peak_over_weights"] <= 1.2 else 1


if __name__ == "__main__":
    sys.exit(main())
