"""Saving a model atomically: the new files appear whole, or the old ones stay.

A save that fails midway (disk full, a permission error, an exception while streaming the
weights) must not leave a truncated ``model.onnx`` where a good one used to be, nor pair an old
model with new external data. :func:`save_model` writes the model and its external data under
their final names into a staging folder beside the destination (same file system, so moving is
a rename), then moves the data file and the model into place. The old data file is kept aside
until the model is in place and put back if that last step fails. On any failure the staging
folder and any folder the save created are removed, and the error says the destination is as it
was.

A missing destination folder is created (``torch.onnx`` raises ``FileNotFoundError`` instead);
see ``docs/migration.md``.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any, Callable

import onnx_ir as ir

from torch_onnx_fx.errors import ArgumentTypeError, SaveError, UnsupportedArgumentError

__all__ = ["save_model", "data_file_name"]


def data_file_name(name: str | os.PathLike[str], model_path: Path) -> str:
    """``name`` checked as the external data file of ``model_path``: a relative path that stays
    inside the model's folder (ONNX stores it relative to the model; ``../x`` or ``/x`` would
    write, and later read, outside it)."""
    text = os.fspath(name)
    parts = Path(text).parts
    if not text or os.path.isabs(text) or ".." in parts or (model_path.parent / text).resolve() == model_path.resolve():
        raise UnsupportedArgumentError(
            f"save(..., external_data_name={text!r}): the external data file must be a relative path "
            f"inside the model's folder ({model_path.parent}), not the model file itself, with no '..'."
        )
    return text


def _read_only(path: Path) -> bool:
    """A file without write permission bits: kept as it is, even for a user (root) whom the file
    system would let replace it — the bits say someone meant it not to change."""
    return path.is_file() and not path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


def _check_destination(path: Path) -> None:
    if path.is_dir():
        raise UnsupportedArgumentError(
            f"save(destination={str(path)!r}): this is a folder; pass a file path such as {str(path / 'model.onnx')!r}."
        )
    if _read_only(path):
        raise SaveError(
            f"Cannot save to {path}: the file is read-only. Nothing was written; make it writable or "
            "choose another path."
        )


def _make_folder(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; return the ones created, deepest first."""
    missing = []
    current = folder
    while not current.exists():
        missing.append(current)
        current = current.parent
    folder.mkdir(parents=True, exist_ok=True)
    return missing


def _remove_created(created: list[Path]) -> None:
    for folder in created:
        try:
            folder.rmdir()
        except OSError:  # not empty (another writer) or already gone: leave it
            break


def save_model(
    model: ir.Model,
    destination: str | os.PathLike[str] | io.IOBase | Any,
    *,
    data_name: str | None,
    callback: Callable[..., None] | None = None,
) -> None:
    """Write ``model`` to ``destination`` (a path, or a binary file object when ``data_name`` is
    None), with its initializers in the external data file ``data_name`` beside it if given."""
    if not isinstance(destination, (str, os.PathLike)):
        if not callable(getattr(destination, "write", None)):
            raise ArgumentTypeError(
                f"save(destination=...): expected a file path (str or os.PathLike) or a binary file object, "
                f"got {type(destination).__name__}."
            )
        # Serialized whole first, so a model protobuf cannot hold fails before anything is written.
        destination.write(ir.serde.serialize_model(model).SerializeToString())
        return
    path = Path(os.path.abspath(os.fspath(destination)))
    _check_destination(path)
    if data_name is not None:
        data_name = data_file_name(data_name, path)
        data_target = path.parent / data_name
        if _read_only(data_target):
            raise SaveError(f"Cannot save to {data_target}: the file is read-only. Nothing was written.")
    try:
        created = _make_folder(path.parent)
    except OSError as exc:
        raise SaveError(f"Cannot create the folder {path.parent} for {path.name}: {exc}. Nothing was written.") from exc
    staging: Path | None = None
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent))
        staged_model = staging / path.name
        if data_name is not None:
            (staging / data_name).parent.mkdir(parents=True, exist_ok=True)
        ir.save(model, staged_model, external_data=data_name, callback=callback)
        _move_into_place(staging, staged_model, path, data_name)
    except BaseException as exc:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        _remove_created(created)
        if isinstance(exc, OSError):
            raise SaveError(
                f"Saving {path} failed: {type(exc).__name__}: {exc}. The files at the destination are as they "
                "were before the save; nothing else was left behind."
            ) from exc
        raise
    shutil.rmtree(staging, ignore_errors=True)


def _move_into_place(staging: Path, staged_model: Path, path: Path, data_name: str | None) -> None:
    """Data file first, then the model; the old data file comes back if the model cannot move."""
    if data_name is None:
        os.replace(staged_model, path)
        return
    target = path.parent / data_name
    target.parent.mkdir(parents=True, exist_ok=True)
    previous = staging / ".previous-data"
    had_previous = target.exists()
    if had_previous:
        os.replace(target, previous)
    try:
        os.replace(staging / data_name, target)
        os.replace(staged_model, path)
    except BaseException:
        if had_previous:
            os.replace(previous, target)
        else:
            target.unlink(missing_ok=True)
        raise
