"""Command line: ``torch-onnx-fx`` (also ``python -m torch_onnx_fx``).

Exit codes: 0 success; 1 the model was exported/checked but does not match PyTorch; 2 bad usage
(arguments, a factory that cannot be loaded); 3 the export failed (the exporter's error is
printed); 4 a file could not be read.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import importlib.util
import os
import sys
from typing import Any, Sequence

__all__ = ["main"]

EXIT_OK, EXIT_MISMATCH, EXIT_USAGE, EXIT_EXPORT, EXIT_FILE = 0, 1, 2, 3, 4


class UsageError(Exception):
    """A problem with the command's arguments; reported with exit code 2."""


# -- loading a model from MODULE:FACTORY ----------------------------------------------------------


def load_factory(target: str) -> Any:
    """``path/to/file.py:name`` or ``package.module:name`` -> the named object."""
    if ":" not in target:
        raise UsageError(f"expected MODULE:FACTORY (e.g. models.py:build), got {target!r}")
    module_part, name = target.rsplit(":", 1)
    if module_part.endswith(".py") or os.path.sep in module_part:
        if not os.path.exists(module_part):
            raise UsageError(f"no such file: {module_part}")
        spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(module_part))[0], module_part)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.path.insert(0, os.path.dirname(os.path.abspath(module_part)))
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    else:
        try:
            module = importlib.import_module(module_part)
        except ImportError as exc:
            raise UsageError(f"cannot import {module_part}: {exc}") from exc
    if not hasattr(module, name):
        raise UsageError(f"{module_part} has no attribute {name!r}")
    return getattr(module, name)


def _parse_shape(text: str) -> list[int]:
    try:
        return [int(d) for d in text.replace("x", ",").split(",") if d]
    except ValueError as exc:
        raise UsageError(f"bad --input-shape {text!r}: use comma-separated ints like 2,3,224,224") from exc


def _parse_dynamic(specs: Sequence[str], count: int) -> tuple[dict[int, str], ...] | None:
    """``INPUT:AXIS:NAME`` entries -> a dynamic_shapes tuple."""
    if not specs:
        return None
    shapes: list[dict[int, str]] = [{} for _ in range(count)]
    for spec in specs:
        parts = spec.split(":")
        if len(parts) != 3 or not parts[0].isdigit() or not parts[1].lstrip("-").isdigit():
            raise UsageError(f"bad --dynamic {spec!r}: use INPUT:AXIS:NAME, e.g. 0:0:batch")
        index, axis, name = int(parts[0]), int(parts[1]), parts[2]
        if index >= count:
            raise UsageError(f"--dynamic {spec!r}: the model has {count} inputs")
        shapes[index][axis] = name
    return tuple(shapes)


def build_model(target: str, input_shapes: Sequence[str], dtype: str) -> tuple[Any, tuple[Any, ...], dict[str, Any], Any]:
    """Call the factory; it returns a module, or ``(module, args[, kwargs[, dynamic_shapes]])``."""
    import torch

    factory = load_factory(target)
    built = factory() if callable(factory) and not isinstance(factory, torch.nn.Module) else factory
    kwargs: dict[str, Any] = {}
    dynamic_shapes = None
    if isinstance(built, tuple):
        model, args, *rest = built
        kwargs = dict(rest[0] or {}) if rest else {}
        dynamic_shapes = rest[1] if len(rest) > 1 else None
        args = args if isinstance(args, tuple) else (args,)
    else:
        model, args = built, ()
    if input_shapes:
        torch_dtype = getattr(torch, dtype, None)
        if not isinstance(torch_dtype, torch.dtype):
            raise UsageError(f"unknown --dtype {dtype!r}")
        args = tuple(torch.randn(_parse_shape(s)).to(torch_dtype) for s in input_shapes)
    if not args and not kwargs:
        raise UsageError("the factory returned a model without inputs: pass --input-shape for each input")
    if isinstance(model, torch.nn.Module):
        model.eval()
    return model, tuple(args), kwargs, dynamic_shapes


# -- commands ----------------------------------------------------------------------------------------


def cmd_export(options: argparse.Namespace) -> int:
    import torch_onnx_fx

    model, args, kwargs, dynamic_shapes = build_model(options.target, options.input_shape, options.dtype)
    parsed = _parse_dynamic(options.dynamic, len(args))
    if parsed is not None:
        dynamic_shapes = parsed
    try:
        program = torch_onnx_fx.export(
            model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, opset_version=options.opset,
            optimize=not options.no_optimize, fusion=options.fusion, verify=options.verify, report=options.report,
            artifacts_dir=options.artifacts_dir, verbose=_verbosity(options),
            export_modules_as_functions=options.functions,
        )
    except (torch_onnx_fx.UnsupportedArgumentError, torch_onnx_fx.ArgumentTypeError) as exc:
        # A bad --opset or --dynamic is the command's usage, not a failed export.
        raise UsageError(str(exc)) from exc
    except torch_onnx_fx.OnnxExporterError as exc:
        print(f"error: export failed: {exc}", file=sys.stderr)
        return EXIT_EXPORT
    program.save(options.output, external_data=options.external_data)
    print(f"saved {options.output} ({len(program.model.graph)} nodes, opset {program.model.opset_imports['']})")
    if options.verify:
        from torch_onnx_fx.diagnostics.verification import verify_onnx_program

        failed = [info for info in verify_onnx_program(program, args, kwargs) if not info.passed]
        if failed:
            print(f"verification: {len(failed)} output(s) differ from PyTorch", file=sys.stderr)
            return EXIT_MISMATCH
    return EXIT_OK


def _verbosity(options: argparse.Namespace) -> bool | None:
    """export's verbose: the progress lines by default (None), nothing with --quiet (False), the
    model's text too with --verbose (True)."""
    if options.quiet:
        return False
    return True if options.verbose else None


def _load_onnx(path: str) -> Any:
    import onnx

    if not os.path.exists(path):
        raise FileNotFoundError(path)
    return onnx.load(path, load_external_data=False)


def _dims(type_proto: Any) -> str:
    dims = [d.dim_param or str(d.dim_value) for d in type_proto.tensor_type.shape.dim]
    return "[" + ", ".join(dims) + "]"


def cmd_inspect(options: argparse.Namespace) -> int:
    import onnx

    model = _load_onnx(options.model)
    graph = model.graph
    print(f"model: {options.model}")
    print(f"producer: {model.producer_name} {model.producer_version}".rstrip())
    print("opsets: " + ", ".join(f"{o.domain or 'ai.onnx'}={o.version}" for o in model.opset_import))
    print("inputs:")
    for value in graph.input:
        element = onnx.TensorProto.DataType.Name(value.type.tensor_type.elem_type)
        print(f"  {value.name}: {element}{_dims(value.type)}")
    print("outputs:")
    for value in graph.output:
        element = onnx.TensorProto.DataType.Name(value.type.tensor_type.elem_type)
        print(f"  {value.name}: {element}{_dims(value.type)}")
    histogram = collections.Counter(node.op_type for node in graph.node)
    print(f"nodes: {len(graph.node)}")
    for op_type, count in histogram.most_common():
        print(f"  {op_type}: {count}")
    by_dtype: collections.Counter[str] = collections.Counter()
    sizes = []
    files = set()
    for tensor in graph.initializer:
        numel = 1
        for d in tensor.dims:
            numel *= d
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
        nbytes = numel * itemsize
        by_dtype[onnx.TensorProto.DataType.Name(tensor.data_type)] += nbytes
        sizes.append((nbytes, tensor.name, list(tensor.dims)))
        for entry in tensor.external_data:
            if entry.key == "location":
                files.add(entry.value)
    print(f"initializers: {len(graph.initializer)}, {sum(by_dtype.values()):,} bytes")
    for dtype_name, nbytes in by_dtype.most_common():
        print(f"  {dtype_name}: {nbytes:,} bytes")
    if files:
        print("external data: " + ", ".join(sorted(files)))
    print("largest tensors:")
    for nbytes, name, dims in sorted(sizes, reverse=True)[: options.top]:
        print(f"  {name} {dims}: {nbytes:,} bytes")
    if model.metadata_props:
        print("metadata: " + ", ".join(f"{p.key}={p.value}" for p in model.metadata_props))
    return EXIT_OK


def cmd_verify(options: argparse.Namespace) -> int:
    import onnx_ir as ir
    import torch

    import torch_onnx_fx

    if bool(options.exported_program) == bool(options.factory):
        raise UsageError("give exactly one of --exported-program FILE.pt2 or --factory MODULE:FACTORY")
    if options.exported_program:
        if not os.path.exists(options.exported_program):
            raise FileNotFoundError(options.exported_program)
        program = torch.export.load(options.exported_program)
        example = program.example_inputs
        if example is None:
            raise UsageError("the saved ExportedProgram has no example inputs")
        args, kwargs = tuple(example[0]), dict(example[1] or {})
    else:
        model, args, kwargs, _ = build_model(options.factory, options.input_shape, options.dtype)
        # Comparing on the factory's inputs needs no dynamic shapes.
        program = torch.export.export(model, args, kwargs=kwargs, strict=False)
    if not os.path.exists(options.model):
        raise FileNotFoundError(options.model)
    onnx_program = torch_onnx_fx.ONNXProgram(ir.load(options.model), program)
    from torch_onnx_fx.diagnostics.verification import verify_onnx_program

    infos = verify_onnx_program(onnx_program, args, kwargs)
    for info in infos:
        status = "ok" if info.passed else "MISMATCH"
        print(f"{info.name}: {status} max abs diff {info.max_abs_diff:.3g}, max rel diff {info.max_rel_diff:.3g}")
    return EXIT_OK if all(info.passed for info in infos) else EXIT_MISMATCH


def cmd_demo(options: argparse.Namespace) -> int:
    from torch_onnx_fx.demo import run_demo

    return run_demo()


# -- the parser ----------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torch-onnx-fx", description="PyTorch to ONNX through torch.export.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    export = commands.add_parser("export", help="export a model built by a Python factory", description=(
        "Export the model a factory builds. TARGET is file.py:name or package.module:name; the factory "
        "returns a module, or (module, args[, kwargs[, dynamic_shapes]])."))
    export.add_argument("target", metavar="MODULE:FACTORY")
    export.add_argument("-o", "--output", required=True, help="where to write the ONNX model")
    export.add_argument("--input-shape", action="append", default=[], metavar="D0,D1,...", help="a random input of this shape (repeat per input); replaces the factory's inputs")
    export.add_argument("--dtype", default="float32", help="dtype of --input-shape inputs (default float32)")
    export.add_argument("--dynamic", action="append", default=[], metavar="INPUT:AXIS:NAME", help="mark an axis dynamic, e.g. 0:0:batch (repeatable)")
    export.add_argument("--opset", type=int, default=None, help="ONNX opset (default: torch_onnx_fx.DEFAULT_OPSET)")
    export.add_argument("--no-optimize", action="store_true", help="skip the optimizer")
    export.add_argument("--fusion", choices=("standard", "none", "onnxruntime"), default="standard",
                        help="fused ONNX operators where the opset has them (standard, the default), none, or those "
                        "plus ONNX Runtime's (onnxruntime: MatMulNBits for 4-bit weights)")
    export.add_argument("--functions", action="store_true", help="one ONNX function per repeated block (export_modules_as_functions=True)")
    export.add_argument("--verify", action="store_true", help="compare with PyTorch; exit 1 on mismatch")
    export.add_argument("--report", action="store_true", help="write a Markdown report into --artifacts-dir")
    export.add_argument("--artifacts-dir", default=".", help="where reports go (default .)")
    export.add_argument("--external-data", action="store_true", help="store weights in <output>.data")
    export.add_argument("--quiet", action="store_true", help="no progress lines")
    export.add_argument("--verbose", action="store_true", help="also print the exported model's text and torch's capture logs")
    export.set_defaults(run=cmd_export)

    inspect = commands.add_parser("inspect", help="describe an ONNX model", description="Inputs, outputs, opsets, operators, weights of an ONNX file.")
    inspect.add_argument("model", help="an .onnx file")
    inspect.add_argument("--top", type=int, default=5, help="how many of the largest tensors to list")
    inspect.set_defaults(run=cmd_inspect)

    verify = commands.add_parser("verify", help="check an ONNX model against PyTorch", description=(
        "Run the ONNX model and the PyTorch program on the same inputs and compare every output. "
        "Exit 1 on mismatch."))
    verify.add_argument("model", help="an .onnx file")
    verify.add_argument("--exported-program", metavar="FILE.pt2", help="a torch.export.save file with example inputs")
    verify.add_argument("--factory", metavar="MODULE:FACTORY", help="a factory as for 'export'")
    verify.add_argument("--input-shape", action="append", default=[], metavar="D0,D1,...")
    verify.add_argument("--dtype", default="float32")
    verify.set_defaults(run=cmd_verify)

    demo = commands.add_parser("demo", help="export the bundled example model, run it in ONNX Runtime and compare with PyTorch")
    demo.set_defaults(run=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    options = parser.parse_args(argv)
    try:
        return options.run(options)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except FileNotFoundError as exc:
        print(f"error: no such file: {exc.filename or exc}", file=sys.stderr)
        return EXIT_FILE
