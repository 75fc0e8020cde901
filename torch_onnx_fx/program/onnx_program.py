"""ONNXProgram: the exported model, its provenance, and ways to save and run it."""

from __future__ import annotations

import contextlib
import dataclasses
import ctypes
import io
import json
import os
import tempfile
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import onnx
import onnx_ir as ir
import torch

from torch_onnx_fx.optimize import optimizer
from torch_onnx_fx.dtypes import as_complex
from torch_onnx_fx.capture.strategies import STRATEGY_NAMES
from torch_onnx_fx.errors import ArgumentTypeError, InputMismatchError, OnnxRuntimeError, UnsupportedArgumentError
from torch_onnx_fx.capture.size_conditions import SizeConditions
from torch_onnx_fx.program.feeds import check_feeds
from torch_onnx_fx.program import safetensors_files
from torch_onnx_fx.program import saving
from torch_onnx_fx.program import naming, weights
from torch_onnx_fx.progress import SaveProgress
from torch_onnx_fx.signature import OutputEntry, ProgramSignature

__all__ = ["ONNXProgram"]

# Model metadata listing the graph's size conditions, for runtimes other than program(...).
SIZE_CONDITIONS_KEY = "pkg.torch_onnx_fx.size_conditions"

# Protobuf cannot serialize a message over 2 GiB; larger models must keep weights outside.
_PROTOBUF_LIMIT = 2 * 1024**3


def _ort_session_initializer(model: str | bytes) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


_NON_NUMPY_INPUTS = {
    torch.bfloat16: (torch.uint16, onnx.TensorProto.BFLOAT16),
    torch.float8_e4m3fn: (torch.uint8, onnx.TensorProto.FLOAT8E4M3FN),
    torch.float8_e4m3fnuz: (torch.uint8, onnx.TensorProto.FLOAT8E4M3FNUZ),
    torch.float8_e5m2: (torch.uint8, onnx.TensorProto.FLOAT8E5M2),
    torch.float8_e5m2fnuz: (torch.uint8, onnx.TensorProto.FLOAT8E5M2FNUZ),
}


def _to_ort_input(value: Any, expected: ir.Value) -> Any:
    import onnxruntime as ort

    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu().contiguous()
        if tensor.is_complex():
            tensor = torch.view_as_real(tensor)
        if tensor.dtype in _NON_NUMPY_INPUTS:
            # numpy has no such dtype: hand ORT the raw bits with the ONNX element type.
            carrier, element_type = _NON_NUMPY_INPUTS[tensor.dtype]
            return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(tensor.view(carrier).numpy(), element_type)
        array = tensor.numpy()
    else:
        dtype = expected.dtype.numpy() if expected.dtype is not None else None
        array = np.asarray(value, dtype=dtype)
    return ort.OrtValue.ortvalue_from_numpy(array)


# ONNX Runtime element types numpy cannot hold; their bytes are copied into a torch tensor.
_NON_NUMPY_TYPES = {
    "tensor(bfloat16)": torch.bfloat16,
    "tensor(float8e4m3fn)": torch.float8_e4m3fn,
    "tensor(float8e4m3fnuz)": torch.float8_e4m3fnuz,
    "tensor(float8e5m2)": torch.float8_e5m2,
    "tensor(float8e5m2fnuz)": torch.float8_e5m2fnuz,
}


def _packed_float4(value: Any) -> torch.Tensor:
    """FLOAT4E2M1 values (one a byte from ORT) packed two a byte, low nibble first, as torch's
    ``float4_e2m1fn_x2`` holds them (the ONNX shape's last dim is twice torch's)."""
    nibbles = torch.from_numpy(np.ascontiguousarray(value.numpy()).view(np.uint8)) & 0x0F
    pairs = nibbles.reshape(*nibbles.shape[:-1], -1, 2)
    return (pairs[..., 0] | (pairs[..., 1] << 4)).contiguous().view(torch.float4_e2m1fn_x2)


def _from_ort_output(value: Any) -> torch.Tensor:
    if value.data_type() == "tensor(float4e2m1)":
        return _packed_float4(value)
    torch_dtype = _NON_NUMPY_TYPES.get(value.data_type())
    if torch_dtype is not None:
        result = torch.empty(value.shape(), dtype=torch_dtype)
        if result.numel():
            ctypes.memmove(result.data_ptr(), value.data_ptr(), result.numel() * result.element_size())
        return result
    array = value.numpy()
    array = np.array(array) if not array.flags.writeable else array
    unsigned = _UNSIGNED.get(array.dtype)
    if unsigned is not None:
        # torch.from_numpy rejects uint16/32/64: read the bits as the signed type, then view.
        signed, torch_dtype = unsigned
        return torch.from_numpy(array.view(signed)).view(torch_dtype)
    return torch.from_numpy(array)


_UNSIGNED = {
    np.dtype(np.uint16): (np.int16, torch.uint16),
    np.dtype(np.uint32): (np.int32, torch.uint32),
    np.dtype(np.uint64): (np.int64, torch.uint64),
}


def _check_flag(method: str, name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"{method}(..., {name}=...): expected True or False, got {type(value).__name__} ({value!r}).")


def _byte_size(model: ir.Model) -> int:
    total = 0
    for value in model.graph.initializers.values():
        if value.const_value is not None:
            total += value.const_value.nbytes
    return total


class ONNXProgram:
    """An exported ONNX model, callable with torch tensors.

    Attributes:
        model: the ONNX model as an ``onnx_ir.Model``.
        exported_program: the ``torch.export.ExportedProgram`` it was translated from.
        capture_strategy: how the program was captured (``ExportedProgram``,
            ``torch.export(strict=False)`` or ``torch.export(strict=True)``).
        state_outputs: whether the graph's outputs end with the new values of mutated buffers
            and inputs (``export(..., state_outputs=True)``); by default they are the user's
            outputs only.
    """

    def __init__(
        self,
        model: ir.Model,
        exported_program: torch.export.ExportedProgram | None,
        *,
        capture_strategy: str | None = None,
        capture_failures: Sequence[tuple[str, BaseException]] = (),
        decomposed: Sequence[str] = (),
        signature: ProgramSignature | None = None,
        state_outputs: bool = False,
    ):
        self.model = model
        self.exported_program = exported_program
        self._signature = signature
        self.state_outputs = state_outputs
        # torch.export's suggested fixes applied to the dynamic shapes during capture, if any.
        self.capture_refinements = ""
        # Instances of repeated blocks copied from a traced one rather than traced
        # (export_modules_as_functions; capture/repeated_blocks).
        self.capture_blocks_replayed = 0
        self.capture_strategy = capture_strategy
        self.capture_failures = list(capture_failures)
        self.decomposed = list(decomposed)
        self._inference_session: Any = None
        # What the graph assumes of the inputs' sizes beyond their shapes (set by export()).
        self._size_conditions = SizeConditions()
        self._dim_names: Mapping[str, str] = {}
        # Progress lines while saving large weights; export() sets it from its verbose argument.
        self.verbose = True
        self._tempdir: tempfile.TemporaryDirectory[str] | None = None

    # -- views ------------------------------------------------------------------------------

    @property
    def size_conditions(self) -> list[str]:
        """The sizes the graph is valid for beyond its inputs' shapes: decisions the model's code
        made on sizes while it was traced (``length % 4 == 0``, ``length <= 8``), in the graph's
        dim names. A call breaking one is refused with ``InputMismatchError``; the list is also
        in the model's metadata (``pkg.torch_onnx_fx.size_conditions``), for runtimes that do
        not check it."""
        return [condition.describe(self._dim_names) for condition in self._size_conditions.conditions]

    def set_size_conditions(self, conditions: SizeConditions, dim_names: Mapping[str, str]) -> None:
        """Record what the graph assumes of its inputs' sizes (``export`` does), and write it into
        the model's metadata."""
        self._size_conditions, self._dim_names = conditions, dict(dim_names)
        if conditions:
            self.model.metadata_props[SIZE_CONDITIONS_KEY] = json.dumps(self.size_conditions)

    @property
    def signature(self) -> ProgramSignature | None:
        """What the program takes and returns, read from the ExportedProgram (None without one)."""
        if self._signature is None and self.exported_program is not None:
            self._signature = ProgramSignature.of(self.exported_program)
        return self._signature

    @property
    def output_entries(self) -> list[OutputEntry]:
        """What each graph output stands for, in graph order (empty without an ExportedProgram)."""
        signature = self.signature
        return [] if signature is None else signature.graph_outputs(self.state_outputs)

    @property
    def _capture_strategy(self) -> str | None:
        """torch.onnx's name of the capture strategy (``TorchExportNonStrictStrategy``…), None
        for a given ExportedProgram: what ``torch.onnx``'s testing helpers read."""
        return STRATEGY_NAMES.get(self.capture_strategy or "")

    @property
    def model_proto(self) -> onnx.ModelProto:
        """The model as an ``onnx.ModelProto`` (a fresh serialization each call)."""
        return ir.serde.serialize_model(self.model)

    def __repr__(self) -> str:
        graph = self.model.graph

        def describe(value: ir.Value) -> str:
            dtype = value.dtype.name if value.dtype is not None else "?"
            dims = "?" if value.shape is None else ", ".join(str(d) for d in value.shape)
            return f"{value.name}: {dtype}[{dims}]"

        lines = [
            "ONNXProgram(",
            f"  opset_imports={dict(graph.opset_imports)},",
            f"  capture_strategy={self.capture_strategy!r},",
            f"  nodes={len(graph)}, initializers={len(graph.initializers)},",
            "  inputs=[" + ", ".join(describe(v) for v in graph.inputs) + "],",
            "  outputs=[" + ", ".join(describe(v) for v in graph.outputs) + "],",
            ")",
        ]
        return "\n".join(lines)

    # -- saving -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _initializer_layout(self, include_initializers: bool, keep_initializers_as_inputs: bool) -> Iterator[None]:
        """Temporarily rearrange initializers for saving; the model is restored afterwards."""
        graph = self.model.graph
        original_inputs = list(graph.inputs)
        original_initializers = dict(graph.initializers)
        user_input_ids = {id(v) for v in original_inputs}
        try:
            if keep_initializers_as_inputs:
                graph.inputs.extend(v for v in original_initializers.values() if id(v) not in user_input_ids)
            if not include_initializers:
                graph.initializers.clear()
            yield
        finally:
            graph.inputs.clear()
            graph.inputs.extend(original_inputs)
            if not include_initializers:
                for value in original_initializers.values():
                    graph.register_initializer(value)

    def save(
        self,
        destination: str | os.PathLike[str] | io.IOBase,
        *,
        include_initializers: bool = True,
        keep_initializers_as_inputs: bool = False,
        external_data: bool | None = None,
        external_data_name: str | None = None,
    ) -> None:
        """Save the model, atomically (see :mod:`torch_onnx_fx.program.saving`).

        Weights go to an external data file beside the model when ``external_data`` is True, or
        when it is None and the weights exceed protobuf's 2 GB; it is named
        ``<destination name>.data`` unless ``external_data_name`` (a relative path inside the
        model's folder) says otherwise. A missing folder is created. On failure the files at the
        destination are unchanged and :class:`SaveError` says why.
        """
        for name, flag in (("include_initializers", include_initializers), ("keep_initializers_as_inputs", keep_initializers_as_inputs)):
            _check_flag("save", name, flag)
        if external_data is not None:
            _check_flag("save", "external_data", external_data)
        is_path = isinstance(destination, (str, os.PathLike))
        if external_data is None:
            external_data = is_path and _byte_size(self.model) > _PROTOBUF_LIMIT
        if external_data and not is_path:
            raise ArgumentTypeError("external_data=True needs a file path as destination, not a file object.")
        if external_data_name is not None and not isinstance(external_data_name, (str, os.PathLike)):
            raise ArgumentTypeError(
                f"save(..., external_data_name=...): expected a relative file path, got {type(external_data_name).__name__}."
            )
        if external_data_name is not None and not external_data:
            raise UnsupportedArgumentError("save(..., external_data_name=...) needs external_data=True.")
        data_name = None
        if external_data:
            data_name = external_data_name if external_data_name is not None else os.path.basename(os.fspath(destination)) + ".data"
        with self._initializer_layout(include_initializers, keep_initializers_as_inputs):
            saving.save_model(
                self.model, destination, data_name=data_name,
                callback=SaveProgress(enabled=self.verbose) if is_path else None,
            )

    def apply_weights(
        self, state_dict: Mapping[str, torch.Tensor] | str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *, strict: bool = True
    ) -> None:
        """Replace the model's weights by the tensors in ``state_dict`` (matched by state-dict name).

        ``state_dict`` is a dict of tensors, or safetensors files: a file, a list of shards, a
        folder, or a sharded checkpoint's ``*.safetensors.index.json`` — in a list, with dicts
        for what the files lack (a meta-built model's non-persistent buffers). Files are
        memory-mapped, not read: ``save(external_data=True)`` then streams each weight from disk.

        Every key is checked before anything is replaced (see :mod:`torch_onnx_fx.program.weights`): with
        ``strict`` (the default) the dict must hold every weight the graph uses and nothing else;
        ``strict=False`` updates the weights it names and ignores other keys. Shapes and dtypes
        must match either way; a mismatch raises :class:`StateDictMismatchError` listing the keys.
        """
        _check_flag("apply_weights", "strict", strict)
        if safetensors_files.is_weights_source(state_dict):
            state_dict = safetensors_files.load(state_dict)  # type: ignore[arg-type]
        weight_names = self.signature.state_names if self.signature is not None else None
        weights.apply_weights(self.model, state_dict, weight_names, strict=strict)
        self.release()

    # -- running ------------------------------------------------------------------------------

    def initialize_inference_session(
        self, initializer: Callable[[str | bytes], Any] = _ort_session_initializer
    ) -> None:
        """Create the ONNX Runtime session (done lazily by ``__call__`` otherwise).

        ``initializer`` takes the model (a path, or serialized bytes) and returns the session.
        """
        if not callable(initializer):
            raise ArgumentTypeError(
                f"initialize_inference_session(initializer=...): expected a function taking the model "
                f"(path or bytes) and returning an onnxruntime.InferenceSession, got {type(initializer).__name__}."
            )
        if _byte_size(self.model) > _PROTOBUF_LIMIT:
            self._tempdir = tempfile.TemporaryDirectory()
            path = os.path.join(self._tempdir.name, "model.onnx")
            self.save(path, external_data=True)
            model: str | bytes = path
        else:
            model = self.model_proto.SerializeToString()
        try:
            self._inference_session = initializer(model)
        except Exception as exc:  # noqa: BLE001 - ONNX Runtime raises its own exception types
            raise OnnxRuntimeError(
                f"Creating the inference session failed: {type(exc).__name__}: {exc}\n"
                "If ONNX Runtime names an operator it has no implementation for, see "
                "docs/troubleshooting.md (run-time errors)."
            ) from exc

    def release(self) -> None:
        """Drop the inference session and any temporary files it needed."""
        self._inference_session = None
        if self._tempdir is not None:
            self._tempdir.cleanup()
            self._tempdir = None

    def _flat_inputs(self, args: Sequence[Any], kwargs: Mapping[str, Any] | None) -> list[Any]:
        """The ONNX inputs for ``args``/``kwargs``, flattened as the export flattened them."""
        graph_inputs = self.model.graph.inputs
        signature = self.signature
        if kwargs and not args and self._feeds_by_input_name(kwargs):
            # program(**{onnx_input_name: value}): what tools built on torch.onnx's ONNXProgram
            # (InputObserver.check_discrepancies) do.
            flat = [kwargs[v.name] for v in graph_inputs]
        else:
            flat = [*args, *(kwargs or {}).values()] if signature is None else signature.graph_feeds(args, kwargs)
        if len(flat) != len(graph_inputs):
            raise InputMismatchError(
                f"The model has {len(graph_inputs)} inputs ({[v.name for v in graph_inputs]}) "
                f"but {len(flat)} were given."
            )
        check_feeds(graph_inputs, flat)
        broken = self._size_conditions.broken(flat)
        if broken:
            sizes = self._size_conditions.sizes_of(flat)
            shown = ", ".join(
                f"{self._size_conditions.label(s, self._dim_names)} = {v}" for s, v in sizes.items() if any(s in c.symbols for c in broken)
            )
            raise InputMismatchError(
                f"These inputs ({shown}) break {'; '.join(c.describe(self._dim_names) for c in broken)}: torch.export "
                "decided on those sizes while it traced the model (a branch of its Python code on a size, a dynamic "
                "dim it squeezes, taken never to be 1, or dims it found equal), and the exported graph computes only what it decided (see "
                "ONNXProgram.size_conditions). Export again with an example of these sizes."
            )
        return flat

    def _feeds_by_input_name(self, kwargs: Mapping[str, Any]) -> bool:
        """Whether keyword arguments name every graph input (and are not the model's own
        keyword arguments, which take precedence)."""
        if set(kwargs) != {v.name for v in self.model.graph.inputs}:
            return False
        exported_kwargs = set(self.signature.keyword_names) if self.signature is not None else set()
        return not set(kwargs) <= exported_kwargs

    def _run(self, output_names: Sequence[str] | None, args: Sequence[Any], kwargs: Mapping[str, Any] | None) -> list[torch.Tensor]:
        if self._inference_session is None:
            self.initialize_inference_session()
        session = self._inference_session
        graph_inputs = self.model.graph.inputs
        flat = self._flat_inputs(args, kwargs)
        feeds = {v.name: _to_ort_input(x, v) for v, x in zip(graph_inputs, flat)}
        names = list(output_names) if output_names is not None else [o.name for o in session.get_outputs()]
        try:
            results = session.run_with_ort_values(names, feeds)
        except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types
            raise OnnxRuntimeError(f"ONNX Runtime failed to run the model: {exc}") from exc
        # ORT returns an input passed through as-is in the caller's own memory (OrtValues made
        # from numpy do not copy); the result must not alias, or outlive, the argument.
        passthrough = set(feeds)
        return [
            _from_ort_output(r).clone() if name in passthrough else _from_ort_output(r)
            for name, r in zip(names, results)
        ]

    def _complex_outputs(self) -> list[bool]:
        """Which graph outputs stand for complex tensors (stored as real pairs in ONNX)."""
        return [entry.is_complex for entry in self.output_entries]

    def __call__(self, *args: Any, **kwargs: Any) -> Sequence[torch.Tensor]:
        """Run the model in ONNX Runtime with the arguments the original model takes.

        Complex inputs and outputs are converted to and from the real representation
        (trailing dim of 2) the ONNX graph uses.
        """
        if not self.model.graph.outputs:
            # e.g. a model returning torch.Size([]): nothing to compute, and ONNX Runtime refuses
            # to create a session for a graph without outputs.
            self._flat_inputs(args, kwargs)  # still reject wrong arguments
            return []
        results = self._run(None, args, kwargs)
        flags = self._complex_outputs()
        if len(flags) == len(results) and any(flags):
            results = [as_complex(r) if flag else r for r, flag in zip(results, flags)]
        return results

    def compute_values(
        self, value_names: Sequence[str], args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None
    ) -> Sequence[torch.Tensor]:
        """Compute intermediate values by name, by exposing them as extra outputs."""
        if isinstance(value_names, (str, bytes)) or not isinstance(value_names, Sequence) or not all(
            isinstance(n, str) for n in value_names
        ):
            raise ArgumentTypeError(
                f"compute_values(value_names=...): expected a list of value names (str), got {value_names!r:.80}."
            )
        if not isinstance(args, (tuple, list)):
            raise ArgumentTypeError(f"compute_values(..., args=...): expected a tuple of the model's arguments, got {type(args).__name__}.")
        if kwargs is not None and not isinstance(kwargs, Mapping):
            raise ArgumentTypeError(f"compute_values(..., kwargs=...): expected a dict or None, got {type(kwargs).__name__}.")
        values = {v.name: v for node in self.model.graph for v in node.outputs}
        values.update({v.name: v for v in self.model.graph.inputs})
        missing = [name for name in value_names if name not in values]
        if missing:
            raise UnsupportedArgumentError(f"compute_values: no values named {missing} in the model.")
        original_outputs = list(self.model.graph.outputs)
        existing = {v.name for v in original_outputs}
        try:
            self.model.graph.outputs.extend(values[n] for n in value_names if n not in existing)
            program = ONNXProgram(self.model, self.exported_program, signature=self.signature)
            return program._run(list(value_names), args, kwargs)
        finally:
            self.model.graph.outputs.clear()
            self.model.graph.outputs.extend(original_outputs)

    def call_reference(self, *args: Any, **kwargs: Any) -> Sequence[torch.Tensor]:
        """Run the model with ONNX's reference evaluator (slow, but independent of ORT)."""
        import onnx.reference

        evaluator = onnx.reference.ReferenceEvaluator(self.model_proto)
        flat = self._flat_inputs(args, kwargs)
        feeds = {}
        for value, x in zip(self.model.graph.inputs, flat):
            if isinstance(x, torch.Tensor):
                tensor = x.detach().cpu()
                feeds[value.name] = (torch.view_as_real(tensor) if tensor.is_complex() else tensor).numpy()
            else:
                feeds[value.name] = np.asarray(x)
        return [torch.from_numpy(np.array(r)) for r in evaluator.run(None, feeds)]

    def rename_axes(self, rename_mapping: Mapping[str | ir.SymbolicDim, str]) -> None:
        """Rename the model's symbolic dims: ``{"s0": "batch"}``, or keyed by a dim read from the
        graph (``program.model.graph.inputs[0].shape[0]``). Dims written as expressions of the
        names (``s0 + s1``) are renamed inside; the size conditions read the new names."""
        names = naming.rename_dims(self.model, rename_mapping)
        if not names:
            return
        # A symbol without a name of its own is called by the symbol (torch.export's s0).
        symbols = {s for c in self._size_conditions.conditions for s in c.symbols}
        self._dim_names = {s: naming.renamed_text(self._dim_names.get(s, s), names) for s in symbols | set(self._dim_names)}
        # Summaries ("rows % 2 == 0") were written in the names of the export.
        self._size_conditions = dataclasses.replace(self._size_conditions, conditions=tuple(
            dataclasses.replace(c, summary=naming.renamed_text(c.summary, names)) if c.summary else c
            for c in self._size_conditions.conditions))
        if self._size_conditions:
            self.model.metadata_props[SIZE_CONDITIONS_KEY] = json.dumps(self.size_conditions)

    def optimize(self) -> None:
        """Optimize the model in place (constant folding, dead code and redundancy removal).

        Functions made by ``export_modules_as_functions`` stay functions: they hold optimized nodes
        already, and inlining them would undo what the export was asked for."""
        optimizer.optimize(
            self.model, weights=self.signature.state_names if self.signature is not None else (),
            keep_functions=bool(self.model.functions),
        )
        self.release()

