"""Where the model's code made a dynamic dim a constant, for a capture that failed on it.

torch.export's non-strict error says only that "tracing inferred a static shape of 2" for a dim
marked dynamic; the line that did it (a Python list of the batch's length, a loop over it, an
``int()`` of a size) is not in the message nor in its traceback, which ends after tracing. Its
shape environment reports each specialization, with the Python stack at that moment, to torch's
structured trace log; recording that log while capture runs again finds the line.

Only a failed capture pays for it: with a handler attached, torch computes every structured log
record (graphs included), so the record is made on a second attempt, never on the first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import traceback
from typing import Any, Iterator

from torch_onnx_fx.capture import model_frames

logger = logging.getLogger(__name__)

__all__ = ["Specialization", "is_specialization_failure", "recorded", "describe"]

# The phrases of torch.export's errors for a dim marked dynamic that tracing made a constant.
_PHRASES = ("but tracing inferred a static shape", "but your code specialized it to be a constant")


@dataclasses.dataclass(frozen=True)
class Specialization:
    dims: tuple[str, ...]
    value: str
    where: str | None


def is_specialization_failure(exc: BaseException) -> bool:
    text = str(exc)
    return any(phrase in text for phrase in _PHRASES)


def _dim_name(source: str) -> str:
    """torch's source name of an input dim (``L['x'].size()[0]``) as the user writes it (``x.shape[0]``)."""
    name = re.sub(r"^L\['([^']+)'\]", r"\1", source)
    return name.replace(".size()[", ".shape[")


# A guard that pins a size symbol to a number: how a specialization shows when torch.export
# defers it (capture runs with deferred runtime asserts and size-oblivious dims).
_PINNED = re.compile(r"^Eq\((?:(?P<symbol>[a-z]\d+), (?P<value>-?\d+)|(?P<value2>-?\d+), (?P<symbol2>[a-z]\d+))\)$")


class _Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[Specialization] = []
        self._sources: dict[str, str] = {}

    def emit(self, record: logging.LogRecord) -> None:
        metadata = getattr(record, "metadata", None)
        if not isinstance(metadata, dict):
            return
        try:
            self._read(metadata)
        except Exception:  # noqa: BLE001 - torch's private record format may change: no line then
            logger.debug("unreadable structured log record", exc_info=True)

    def _read(self, metadata: dict[str, Any]) -> None:
        created = metadata.get("create_symbol")
        if isinstance(created, dict) and created.get("source"):
            self._sources.setdefault(str(created.get("symbol")), _dim_name(str(created["source"])))
            return
        specialized = metadata.get("symbolic_shape_specialization")
        if isinstance(specialized, dict):
            dims = tuple(_dim_name(str(source)) for source in specialized.get("sources") or ())
            self._add(dims, str(specialized.get("value")), specialized.get("stack"))
            return
        guard = metadata.get("guard_added_fast")
        pinned = _PINNED.match(str(guard.get("expr", ""))) if isinstance(guard, dict) else None
        if pinned:
            symbol = pinned.group("symbol") or pinned.group("symbol2")
            if symbol in self._sources:
                self._add((self._sources[symbol],), pinned.group("value") or pinned.group("value2"), guard.get("stack"))

    def _add(self, dims: tuple[str, ...], value: str, stack: Any) -> None:
        where = model_frames.describe_frames(model_frames.below_exporter(_frames(stack if isinstance(stack, list) else [])))
        self.records.append(Specialization(dims, value, where))


def _frames(stack: list[dict[str, Any]]) -> list[traceback.FrameSummary]:
    # The structured log interns file names; its table maps each back.
    from torch._logging import structured

    names = {index: name for name, index in getattr(structured, "INTERN_TABLE", {}).items()}
    frames = []
    for frame in stack:
        filename = frame.get("filename")
        filename = names.get(filename, filename) if isinstance(filename, int) else filename
        if isinstance(filename, str):
            frames.append(traceback.FrameSummary(filename, frame.get("line") or 0, frame.get("name") or "", line=frame.get("loc") or ""))
    return frames


@contextlib.contextmanager
def recorded() -> Iterator[list[Specialization]]:
    """The specializations of dims made while the block runs (a capture), in the order made."""
    from torch._logging._internal import trace_log

    recorder = _Recorder()
    trace_log.addHandler(recorder)
    try:
        yield recorder.records
    finally:
        trace_log.removeHandler(recorder)


def describe(records: list[Specialization]) -> str:
    lines: list[str] = []
    for record in records:
        line = f"  {' = '.join(record.dims)} became {record.value} at {record.where}"
        # A dim pinned by several guards of one line is said once.
        if record.dims and record.where and line not in lines:
            lines.append(line)
    if not lines:
        return ""
    return "Where tracing made dims marked dynamic constants (the model's code at that moment):\n" + "\n".join(lines)
