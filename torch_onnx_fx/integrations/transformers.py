"""A transformers exporter backend: ``transformers.exporters`` with torch_onnx_fx underneath.

transformers' ``OnnxExporter`` captures the model with ``torch.export`` (its generation split into
prefill and decode components, the KV cache flattened into tensors named by their keyword path,
``cache.layers.0.keys``), then converts the program with ``torch.onnx.export`` around ~33 patches
of torch functions and 15 FX fixes written for torch.onnx. This backend keeps transformers' own
capture (its ``torch.export`` patches and input preparation, so the runner gets the graph it
expects) and converts with :func:`torch_onnx_fx.export` instead, without the torch.onnx patches:
the exporter computes those cases itself (``docs/transformers.md``). Where transformers' capture
fails (data-dependent guards, a module it cannot swap), the same preparation is run once more with
torch_onnx_fx's capture in place of its ``torch.export.export`` call, which is as lenient as
:func:`torch_onnx_fx.export` is on its own.
The graph's inputs and outputs are named as transformers' runner matches them: inputs by keyword
path (``input.`` before a cache tensor the model also returns), outputs in the order of the
model's flattened output.

    import torch_onnx_fx.integrations.transformers  # registers the "torch_onnx_fx" export format
    from torch_onnx_fx.integrations.transformers import TorchOnnxFxConfig, TorchOnnxFxExporter

    exported = TorchOnnxFxExporter().export_for_generation(model, inputs, TorchOnnxFxConfig(dynamic=True))
    exported.save_pretrained("exported")   # prefill.onnx, decode.onnx, export.json, config.json
    ExportedModel.from_pretrained("exported", device="cpu")  # ONNX Runtime runners, as for "onnx"
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
from collections.abc import Iterator, MutableMapping
from typing import Any

try:
    from transformers.exporters import OnnxConfig, OnnxExporter, register_backend
    from transformers.exporters.exporter_dynamo import DynamoExporter
    from transformers.exporters.metadata import record_output_structure
    from transformers.exporters.onnxruntime_fusions import fuse_for_onnxruntime
    from transformers.exporters.runners.runner_onnx import OnnxModelRunner
    from transformers.exporters.utils import disambiguate_io_names, patch_model_outputs, quantize_converted_model
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "torch_onnx_fx.integrations.transformers needs transformers with its exporters "
        "(transformers.exporters, transformers >= 5.24, the version tested): pip install -U transformers"
    ) from exc

import onnx_ir as ir
import torch

from torch_onnx_fx.capture import capture
from torch_onnx_fx.export import export
from torch_onnx_fx.signature import ProgramSignature

__all__ = ["EXPORT_FORMAT", "TorchOnnxFxConfig", "TorchOnnxFxExporter", "register"]

logger = logging.getLogger(__name__)

# The key transformers' registry, export.json and AutoHfExporter.from_config know the backend by.
EXPORT_FORMAT = "torch_onnx_fx"


@dataclasses.dataclass
class TorchOnnxFxConfig(OnnxConfig):
    """transformers' ``OnnxConfig`` (``dynamic``, ``strict``, ``dynamic_shapes``, ``opset_version``,
    ``optimize``, ``ort_fusions``, ``quantizer``) under this backend's export format."""

    export_format: str = EXPORT_FORMAT


class TorchOnnxFxExporter(OnnxExporter):
    """``OnnxExporter`` whose conversion is :func:`torch_onnx_fx.export`; saving, loading and the
    ONNX Runtime runner are transformers' own, so a saved folder loads as an ``onnx`` one does."""

    export_format = EXPORT_FORMAT
    config_class = TorchOnnxFxConfig
    required_packages = ["torch", "onnx", "onnxscript", "onnx_ir", "torch_onnx_fx"]
    tested_versions = {"torch": "2.13.0", "onnx": "1.23.2", "onnxscript": "0.7.2"}

    def export_program(
        self, model: Any, sample_inputs: MutableMapping[str, Any], config: OnnxConfig
    ) -> tuple[ir.Model, Any]:
        quantizer = config.quantizer
        ort_fusions = config.ort_fusions if quantizer is None or not quantizer.quantizes_fx_graph else None
        try:
            with patch_model_outputs(model) as (input_names, output_names, traced_outputs):
                # transformers' capture: its input preparation, dynamic shapes (Dim.AUTO for
                # dynamic=True), cache pytrees and torch.export patches; not OnnxExporter's torch.onnx ones.
                program, metadata = DynamoExporter.export_program(self, model, sample_inputs, config=config)
        except Exception as theirs:  # noqa: BLE001 - retried with our capture, re-raised if that fails too
            logger.info("transformers' capture failed (%s: %s); trying torch_onnx_fx's", type(theirs).__name__, theirs)
            with patch_model_outputs(model) as (input_names, output_names, traced_outputs):
                with _captured_by_torch_onnx_fx((input_names, output_names, traced_outputs)):
                    program, metadata = DynamoExporter.export_program(self, model, sample_inputs, config=config)
        input_names, output_names = disambiguate_io_names(input_names, output_names)
        onnx_program = export(
            program,
            (),
            kwargs=copy.deepcopy(dict(sample_inputs)),
            input_names=_graph_input_names(program, input_names),
            output_names=output_names,
            opset_version=config.opset_version,
            optimize=config.optimize,
            verbose=False,
        )
        model_ir = onnx_program.model
        if ort_fusions:
            fuse_for_onnxruntime(model_ir, ort_fusions)
        model_ir = quantize_converted_model(model_ir, sample_inputs, config)
        record_output_structure(metadata, traced_outputs[-1])
        return model_ir, metadata


@contextlib.contextmanager
def _captured_by_torch_onnx_fx(recorded: tuple[list[Any], ...]) -> Iterator[None]:
    """transformers' ``torch.export.export`` call answered by :func:`torch_onnx_fx.capture.capture`.

    DynamoExporter looks the function up when it calls it, so replacing the attribute for the
    duration of one ``export_program`` reaches it without copying its preparation; our capture
    then calls the original. The names ``patch_model_outputs`` records come from one eager call of
    the prepared call first: our capture may trace several times (each trace appends) and
    TorchDynamo's trace runs none of the recording's Python (nor the lazy import transformers'
    cache unflattening does on first use)."""
    original = torch.export.export

    def ours(mod: Any, args: tuple[Any, ...] = (), kwargs: Any = None, *, dynamic_shapes: Any = None, **_: Any) -> torch.export.ExportedProgram:
        with torch.no_grad():
            mod(*copy.deepcopy(tuple(args)), **copy.deepcopy(dict(kwargs or {})))
        names = [list(record) for record in recorded]
        torch.export.export = original
        try:
            return capture(mod, tuple(args), kwargs, dynamic_shapes).exported_program
        finally:
            torch.export.export = ours
            for record, kept in zip(recorded, names):
                record[:] = kept

    torch.export.export = ours
    try:
        yield
    finally:
        torch.export.export = original


def _graph_input_names(program: Any, names: list[str]) -> list[str]:
    """The names of the inputs the graph keeps, in order: ``names`` has one per tensor leaf of the
    call, and a leaf the program took as a constant has no graph input."""
    signature = ProgramSignature.of(program)
    if len(signature.user_inputs) != len(names):
        return names
    kept = {node for node, _ in signature.tensor_inputs}
    return [name for name, (node, _) in zip(names, signature.user_inputs) if node in kept]


def register() -> None:
    """Register the backend with transformers (done on import; again is harmless)."""
    register_backend(TorchOnnxFxExporter, OnnxModelRunner)


register()
