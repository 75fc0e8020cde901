"""Weights from safetensors files — one file, a list of shards, a folder or a sharded checkpoint's
``*.safetensors.index.json`` — without reading them into memory.

This is how the weights of a model exported on the ``meta`` device arrive: a checkpoint of
several gigabytes in shards. Each tensor here is a view of a copy-on-write memory map of its
file, so pages are read from disk only when the model is saved or run, and then one tensor at a
time. The format is read from its specification (8-byte little-endian header length, a JSON
header of ``name -> {dtype, shape, data_offsets}``, then the data), so no package is needed.
"""

from __future__ import annotations

import json
import math
import mmap
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import torch

from torch_onnx_fx.errors import ArgumentTypeError, WeightsFileError

__all__ = ["load", "is_weights_source"]

_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "U16": torch.uint16, "U32": torch.uint32, "U64": torch.uint64, "BOOL": torch.bool,
    "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2, "C64": torch.complex64,
}
# A header larger than this is not a safetensors header (the reference reader's own limit).
_MAX_HEADER = 100 * 1024 * 1024


def is_weights_source(value: Any) -> bool:
    """Whether ``value`` names files (a path, or a list of paths and state dicts) rather than
    being a state dict itself."""
    if isinstance(value, (str, os.PathLike)):
        return True
    return (
        isinstance(value, (list, tuple)) and bool(value)
        and all(isinstance(v, (str, os.PathLike, Mapping)) for v in value)
        and any(isinstance(v, (str, os.PathLike)) for v in value)
    )


def load(source: str | os.PathLike[str] | Iterable[str | os.PathLike[str] | Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Every tensor of the files ``source`` names, by name, memory-mapped; state dicts in a list
    are taken as they are (a checkpoint lacks the non-persistent buffers a meta-built model still
    needs, such as rotary frequencies). A name given twice is an error (shards of one checkpoint
    never repeat one)."""
    tensors: dict[str, torch.Tensor] = {}
    origin: dict[str, Any] = {}
    items = list(source) if isinstance(source, (list, tuple)) else [source]
    for item in items:
        parts = [("a state dict", dict(item))] if isinstance(item, Mapping) else [(path, _read(path)) for path in _files(item)]
        for where, found in parts:
            for name, tensor in found.items():
                if name in tensors:
                    raise WeightsFileError(f"apply_weights: {name!r} is in both {origin[name]} and {where}.")
                tensors[name], origin[name] = tensor, where
    return tensors


def _files(source: Any) -> list[Path]:
    if isinstance(source, (list, tuple)):
        return [file for item in source for file in _files(item)]
    if not isinstance(source, (str, os.PathLike)):
        raise ArgumentTypeError(f"apply_weights: expected a path or a list of paths, got {type(source).__name__}.")
    path = Path(source)
    if path.is_dir():
        index = sorted(path.glob("*.safetensors.index.json"))
        if index:
            return _files(index[0])
        shards = sorted(path.glob("*.safetensors"))
        if not shards:
            raise WeightsFileError(f"apply_weights: {path} holds no .safetensors file.")
        return shards
    if not path.exists():
        raise WeightsFileError(f"apply_weights: {path} does not exist.")
    if path.name.endswith(".json"):
        try:
            weight_map = json.loads(path.read_text())["weight_map"]
        except (ValueError, KeyError, TypeError) as exc:
            raise WeightsFileError(f"apply_weights: {path} is not a safetensors index (no weight_map).") from exc
        return [path.parent / name for name in dict.fromkeys(weight_map.values())]
    return [path]


def _read(path: Path) -> dict[str, torch.Tensor]:
    size = path.stat().st_size
    with open(path, "rb") as file:
        prefix = file.read(8)
        length = int.from_bytes(prefix, "little") if len(prefix) == 8 else -1
        if not 0 < length <= min(_MAX_HEADER, size - 8):
            raise WeightsFileError(f"apply_weights: {path} is not a safetensors file (no valid header).")
        try:
            header = json.loads(file.read(length))
        except ValueError as exc:
            raise WeightsFileError(f"apply_weights: {path} has a corrupt safetensors header.") from exc
        # Copy-on-write: torch wants a writable buffer, and the file must never be written.
        mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_COPY) if size > 8 + length else None
    base = 8 + length
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        tensors[name] = _tensor(path, name, entry, mapped, base, size)
    return tensors


def _tensor(path: Path, name: str, entry: Any, mapped: mmap.mmap | None, base: int, size: int) -> torch.Tensor:
    try:
        dtype = _DTYPES[entry["dtype"]]
        shape = [int(d) for d in entry["shape"]]
        begin, end = (int(o) for o in entry["data_offsets"])
    except (KeyError, TypeError, ValueError) as exc:
        raise WeightsFileError(f"apply_weights: {path}: entry {name!r} is not a valid tensor ({entry!r}).") from exc
    count = math.prod(shape)
    if end - begin != count * dtype.itemsize or base + end > size or begin < 0:
        raise WeightsFileError(f"apply_weights: {path}: the data of {name!r} does not fit its shape {shape} and dtype {entry['dtype']}.")
    if count == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(mapped, dtype=dtype, count=count, offset=base + begin).reshape(shape)
