"""What the benchmark, the two sweeps and the plots share: the machine a run was measured on, the
JSON-lines results they write, and the charts their pages show.

Each tool keeps its own record type and page; this module only holds what would otherwise be
written three times: the machine description recorded with every run (and the sentence the pages
make of it), the loop that reads a results file, the machine-and-records file the benchmarks
keep (a run of some rows keeping the others), and the names of the PNG charts
``tools/pages/plots.py`` draws into ``docs/img/``, so the pages that show a chart and the tool that draws
it cannot disagree about a file name.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

__all__ = [
    "REPO", "machine_info", "describe_machine", "describe_versions", "read_entries", "read_results", "merge_results",
    "IMAGE_DIR", "BENCH_RATIOS_PNG", "OPSWEEP_STATUS_PNG", "OPSWEEP_CAUSES_PNG", "MODELSWEEP_FAMILIES_PNG",
    "PLOTS", "PLOTS_COMMAND", "image", "compile_package", "save_model_records", "failure",
]

REPO = Path(__file__).resolve().parent.parent


def machine_info(command: str) -> dict[str, Any]:
    """The machine, package versions and commit of a run started by ``command``, as a results line."""
    import onnx
    import onnxruntime
    import onnxscript
    import torch

    cpu = platform.processor()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        commit = subprocess.run(
            ["git", "describe", "--always", "--dirty"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {
        "kind": "machine",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cores": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "onnxscript": onnxscript.__version__,
        "onnxruntime": onnxruntime.__version__,
        "onnx": onnx.__version__,
        "commit": commit,
        "command": command,
    }


def describe_machine(info: dict[str, Any]) -> str:
    """``2 cores (CPU name), Python 3.x.y`` from a :func:`machine_info` line."""
    return f"{info['cores']} cores ({info['cpu']}), Python {info['python']}"


def describe_versions(info: dict[str, Any], packages: Sequence[str]) -> str:
    """``torch 2.x, onnxscript 0.y, …``: the recorded versions of ``packages``, in that order."""
    return ", ".join(f"{package} {info[package]}" for package in packages)


def read_entries(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each line of a results file as ``(kind, the other fields)``; what a kind means is the tool's."""
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        yield entry.pop("kind"), entry


def read_results(path: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """A benchmark's results file (one machine line, then one line per record): the machine of the
    latest run and the records; (None, []) before the first run."""
    if not path.exists():
        return None, []
    entries = list(read_entries(path))
    machine = next((e for kind, e in entries if kind == "machine"), None)
    return machine, [e for kind, e in entries if kind == "record"]


def merge_results(path: Path, machine: dict[str, Any], fresh: Sequence[dict[str, Any]], key: Sequence[str]) -> list[dict[str, Any]]:
    """Write ``fresh`` records after the earlier runs' records it does not measure again (same
    ``key`` fields), under this run's machine line; every record says which commit measured it.
    The records written are returned."""
    earlier_machine, earlier = read_results(path)
    for record in earlier:
        record.setdefault("commit", earlier_machine["commit"] if earlier_machine else "?")
    fresh = [{**record, "commit": machine["commit"]} for record in fresh]
    measured = {tuple(r[k] for k in key) for r in fresh}
    records = [r for r in earlier if tuple(r[k] for k in key) not in measured] + fresh
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [("machine", machine)] + [("record", r) for r in records]
    path.write_text("\n".join(json.dumps({"kind": kind, **entry}) for kind, entry in lines) + "\n")
    return records


# -- the charts ------------------------------------------------------------------------------------

IMAGE_DIR = REPO / "docs" / "img"
BENCH_RATIOS_PNG = "bench_ratios.png"
OPSWEEP_STATUS_PNG = "opsweep_status.png"
OPSWEEP_CAUSES_PNG = "opsweep_causes.png"
MODELSWEEP_FAMILIES_PNG = "modelsweep_families.png"
PLOTS = (BENCH_RATIOS_PNG, OPSWEEP_STATUS_PNG, OPSWEEP_CAUSES_PNG, MODELSWEEP_FAMILIES_PNG)
# matplotlib is an optional extra: neither the package nor its tests need it.
PLOTS_COMMAND = "pip install -e '.[plots]' && python tools/pages/plots.py"


def failure(exc: BaseException) -> str:
    """How a result file records an exception: its type and the first line of its message (an
    empty message too), cut at 200 characters."""
    message = str(exc)
    return f"{type(exc).__name__}: {message.splitlines()[0][:200] if message else ''}"


def image(alt: str, name: str) -> str:
    """The Markdown line that shows chart ``name`` on a page of ``docs/``."""
    return f"![{alt}](img/{name})"


def replace_section(text: str, start_marker: str, end_marker: str, section: str) -> str | None:
    """``text`` with the part from ``start_marker`` to the next ``end_marker`` (both included)
    replaced by ``section``; None when the markers are not both there."""
    start = text.find(start_marker)
    end = text.find(end_marker, start)
    if start < 0 or end < 0:
        return None
    return text[:start] + section + text[end + len(end_marker):]


def write_section(page: Path, start_marker: str, end_marker: str, section: str) -> None:
    """Write ``section`` over the page's part between the markers, or append it to the page
    when the markers are not there yet."""
    text = page.read_text()
    updated = replace_section(text, start_marker, end_marker, section)
    page.write_text(updated if updated is not None else text.rstrip() + "\n\n" + section + "\n")


def run_in_worker(context: Any, target: Any, args: tuple[Any, ...], log_path: Path, timeout_s: float, initial: Any) -> Any:
    """Run ``target(*args, connection, log_path)`` in a process of its own and return the last record
    it sent (``("stage" | "done", fields)`` messages; ``initial``'s type rebuilds them). A worker past
    ``timeout_s`` is killed (status ``timeout``); one that exits without ``done`` has ``crashed``,
    with the last line of its log."""
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=target, args=(*args, send, str(log_path)))
    process.start()
    send.close()
    last = initial
    deadline = time.monotonic() + timeout_s
    finished = False
    # The worker's end of the pipe closes when it exits, so a crash ends the wait with EOFError.
    while not finished and receive.poll(max(0.0, deadline - time.monotonic())):
        try:
            kind, payload = receive.recv()
        except EOFError:
            break
        last, finished = type(initial)(**payload), kind == "done"
    if not finished and process.is_alive():
        process.kill()
        last.status, last.error = "timeout", f"killed after {timeout_s:.0f} s during {last.stage}"
    elif not finished:
        process.join()
        tail = [line for line in log_path.read_text(errors="replace").splitlines() if line.strip()][-1:]
        last.status = "crashed"
        last.error = f"exit code {process.exitcode} during {last.stage}" + (f": {tail[0][:300]}" if tail else "")
    process.join()
    receive.close()
    return last


_PHASE = re.compile(r"\[torch_onnx_fx\] (\w+): ok in ([0-9.]+) s")


@functools.cache
def compile_package() -> None:
    """Write torch_onnx_fx's bytecode before a fresh process times its first export.

    pip compiles a package's modules when it installs it, and torch, onnxscript and the rest were
    installed so; a checkout installed in editable mode under ``PYTHONDONTWRITEBYTECODE=1`` (this
    machine's default) compiled all 150 modules from source in every fresh process instead: 0.2 s
    of a first export that no installed copy pays. Writing the bytecode once makes the benchmark
    time what users run.
    """
    import compileall

    compileall.compile_dir(REPO / "torch_onnx_fx", quiet=1)


def run_script(script: str, argv: Sequence[str], base: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run ``script`` (Python source printing one ``RESULT {json}`` line) in a fresh interpreter
    from the repository's root; its record, with the phases torch_onnx_fx's first export printed.
    ``base`` fields describe the run when it times out or dies without a result."""
    compile_package()
    try:
        done = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {**base, "status": "timeout", "seconds": timeout}
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {**base, "status": "crashed", "error": tail[:200]}
    record = json.loads(lines[-1][len("RESULT "):])
    phases: dict[str, float] = {}
    for name, seconds in _PHASE.findall(done.stderr):  # the first export's phases
        phases.setdefault(name, float(seconds))
    if phases:
        record["phases"] = phases
    return record


def read_records(path: Path, record_type: Any) -> tuple[list[dict[str, Any]], list[Any]]:
    """The runs' headers and the records (as ``record_type``) of a results file; none if it does
    not exist yet."""
    runs, records = [], []
    if path.exists():
        for kind, entry in read_entries(path):
            if kind == "run":
                runs.append({"kind": kind, **entry})
            else:
                records.append(record_type(**entry))
    return runs, records


def save_model_records(path: Path, record_type: Any, command: str, records: Sequence[Any] | None, merge: bool) -> tuple[dict[str, Any], list[Any]]:
    """A corpus check's results (records with a ``model`` field): ``records`` of a new run saved
    first (over the earlier ones, or merged into them by model for a rerun of some models, as
    ``--models`` asks), then all of them read back with the run that measured the whole corpus,
    which the page describes."""
    if records is not None:
        run = {**machine_info(command), "kind": "run"}
        runs, kept = read_records(path, record_type) if merge else ([], [])
        done = {r.model for r in records}
        write_records(path, [*runs, run], [*(r for r in kept if r.model not in done), *records])
    runs, every = read_records(path, record_type)
    first = next((r for r in runs if "--models" not in r.get("command", "")), runs[-1] if runs else {})
    return first, every


def write_records(path: Path, runs: Sequence[dict[str, Any]], records: Sequence[Any]) -> None:
    """A results file: the runs' headers, then one line per record (a dataclass)."""
    import dataclasses

    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(run) for run in runs]
    lines += [json.dumps({"kind": "record", **dataclasses.asdict(r)}) for r in records]
    path.write_text("\n".join(lines) + "\n")
