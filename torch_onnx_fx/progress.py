"""User-facing progress: one line per export phase with its wall time.

Silent with ``verbose=False``. Details go to the ``logging`` module, not here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
import time
from typing import Any, Iterator

__all__ = ["Progress", "Phase", "SaveProgress"]

# A phase still running after FIRST_NOTICE seconds prints how long it has run, then every
# NOTICE_INTERVAL: a 60 s capture of a large model otherwise looks like a hang.
FIRST_NOTICE = 5.0
NOTICE_INTERVAL = 15.0


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
        done = threading.Event()
        if self.enabled:
            threading.Thread(target=self._notices, args=(name, start, done), daemon=True).start()
        try:
            yield record
            record.ok = True
        finally:
            done.set()
            record.seconds = time.perf_counter() - start
            self._print(record)

    @staticmethod
    def _notices(name: str, start: float, done: threading.Event) -> None:
        wait = FIRST_NOTICE
        while not done.wait(wait):
            print(f"[torch_onnx_fx] {name}: running for {time.perf_counter() - start:.0f} s", file=sys.stderr)
            wait = NOTICE_INTERVAL

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


# Seconds between progress lines while saving; a save that finishes sooner prints nothing.
SAVE_INTERVAL = 5.0


class SaveProgress:
    """``ir.save`` callback: while a model's weights are written as external data, a line every
    few seconds with the tensors and bytes written so far, and a last line if any was printed.

    Saving a multi-GB model takes minutes on a slow disk; small models stay silent.
    """

    def __init__(self, enabled: bool = True, interval: float | None = None):
        self.enabled = enabled
        self.interval = SAVE_INTERVAL if interval is None else interval
        self.count = 0
        self.bytes = 0
        self.printed = False
        self._start = time.perf_counter()
        self._last = self._start

    def __call__(self, tensor: Any, info: Any) -> None:
        # Callbacks may arrive out of order from worker threads: count them, ignore info.index.
        self.count += 1
        self.bytes += int(getattr(tensor, "nbytes", 0) or 0)
        if not self.enabled:
            return
        now = time.perf_counter()
        last = self.count >= info.total
        if now - self._last >= self.interval or (last and self.printed):
            self._last = now
            self.printed = True
            print(
                f"[torch_onnx_fx]   saving weights: {self.count}/{info.total} tensors, "
                f"{self.bytes / 2**30:.2f} GiB in {now - self._start:.0f} s",
                file=sys.stderr,
            )
