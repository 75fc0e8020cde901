"""User-facing progress: one line per export phase with its wall time.

Silent with ``verbose=False``. Details go to the ``logging`` module, not here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from typing import Iterator

__all__ = ["Progress", "Phase"]


@dataclasses.dataclass
class Phase:
    name: str
    detail: str = ""
    seconds: float = 0.0
    ok: bool = False


class Progress:
    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.phases: list[Phase] = []
        self._last_step_print = 0.0

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[Phase]:
        record = Phase(name)
        self.phases.append(record)
        start = time.perf_counter()
        try:
            yield record
            record.ok = True
        finally:
            record.seconds = time.perf_counter() - start
            self._print(record)

    def _print(self, record: Phase) -> None:
        if not self.enabled:
            return
        status = "ok" if record.ok else "FAILED"
        detail = f" ({record.detail})" if record.detail else ""
        print(f"[torch_onnx_fx] {record.name}: {status} in {record.seconds:.2f} s{detail}", file=sys.stderr)

    def step(self, done: int, total: int) -> None:
        """Progress inside a long phase, printed at most every 5 seconds."""
        if not self.enabled or total < 5000:
            return
        now = time.perf_counter()
        if now - self._last_step_print >= 5.0 or done == total:
            self._last_step_print = now
            print(f"[torch_onnx_fx]   {done}/{total} nodes", file=sys.stderr)
