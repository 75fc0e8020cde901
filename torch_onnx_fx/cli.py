"""Command line: ``torch-onnx-fx`` / ``python -m torch_onnx_fx``."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="torch-onnx-fx", description="PyTorch to ONNX through torch.export.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", help="export the bundled example model, run it in ONNX Runtime and compare with PyTorch")
    options = parser.parse_args(argv)
    if options.command == "demo":
        from torch_onnx_fx.demo import run_demo

        return run_demo()
    parser.print_help(sys.stderr)
    return 2
