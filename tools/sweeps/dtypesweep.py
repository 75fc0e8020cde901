"""The operator sweep in every dtype OpInfo samples on CPU, side by side with torch.onnx.

Runs ``tools/sweeps/opsweep.py`` once per dtype (both exporters in the same run), keeps each run's
results in ``tools/results/opsweep_<dtype>.jsonl`` with a page ``docs/coverage_<dtype>.md``
(float32's page is ``docs/coverage.md`` itself), and writes the section "Every dtype" of
``docs/coverage.md``: one table per dtype and a summary over all of them::

    python tools/sweeps/dtypesweep.py --run                 # every dtype, about 2 hours on 2 cores
    python tools/sweeps/dtypesweep.py --run --dtypes int8,uint8
    python tools/sweeps/dtypesweep.py --summary             # rewrite the section from the results

``--merge`` joins a run of one exporter with a run of the other (same dtype and samples) into the
results file, for when the two were run apart (torch.onnx's results do not depend on our code,
so they need not be re-run after every change); ``--override`` files replace the records of the
ops they contain (a re-run of a few ops after a change to the comparison).
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO, REPO / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from tools.sweeps.opsweep import APART, DTYPES, DTYPES_MARKER, OURS, STATUSES, THEIRS, Record, read_results, render_markdown  # noqa: E402

__all__ = ["results_path", "page_path", "merge", "dtype_section", "main", "START_MARKER", "END_MARKER"]

START_MARKER = DTYPES_MARKER
END_MARKER = "<!-- dtypesweep:end -->"
COVERAGE = REPO / "docs" / "coverage.md"
SAMPLES = 2


def results_path(dtype: str) -> Path:
    return REPO / "tools" / "results" / f"opsweep_{dtype}.jsonl"


def page_path(dtype: str) -> Path:
    return COVERAGE if dtype == "float32" else REPO / "docs" / f"coverage_{dtype}.md"


def _write_results(path: Path, header: dict[str, Any], records: Sequence[Record]) -> None:
    import dataclasses
    import json

    lines = [json.dumps({**header, "kind": "header"})] + [json.dumps({"kind": "record", **dataclasses.asdict(r)}) for r in records]
    path.write_text("\n".join(lines) + "\n")


def merge(first: Path, second: Path, overrides: Sequence[Path] = ()) -> tuple[dict[str, Any], list[Record]]:
    """One results file from two runs of the same dtype (one exporter each, or both)."""
    header, records = read_results(first)
    other_header, other_records = read_results(second)
    if header["dtype"] != other_header["dtype"] or header["samples"] != other_header["samples"]:
        raise SystemExit(f"{first} and {second} are runs of different dtypes or sample counts")
    exporters = [e for e in (OURS, THEIRS) if e in header["exporters"] + other_header["exporters"]]
    header = {**header, "exporters": exporters, "minutes": header["minutes"] + other_header["minutes"]}
    if other_header.get("commit") != header.get("commit"):
        # Only the first word of each: merged headers already say what they were merged from.
        first, second = header["commit"].split()[0], other_header["commit"].split()[0]
        header["commit"] = f"{first} (older records of {', '.join(other_header['exporters'])} at {second})"
    kept = {(r.op, r.sample, r.exporter): r for r in records}
    for record in other_records:
        kept.setdefault((record.op, record.sample, record.exporter), record)
    for path in overrides:
        _, replacing = read_results(path)
        for record in replacing:
            kept[(record.op, record.sample, record.exporter)] = record
    # Not capturable, rejected by eager, random: properties of the sample, so the newer run's
    # verdict holds for both exporters (a sample found random is compared by neither).
    for (op, sample, exporter), record in list(kept.items()):
        if record.status in APART and exporter == OURS:
            other = kept.get((op, sample, THEIRS))
            if other is not None and other.status not in APART:
                kept[(op, sample, THEIRS)] = dataclasses.replace(other, status=record.status, error=record.error)
    return header, list(kept.values())


def _counts(records: Sequence[Record], exporter: str) -> dict[str, int]:
    counts = {status: 0 for status in STATUSES}
    for record in records:
        if record.exporter == exporter and record.status in STATUSES:
            counts[record.status] += 1
    return counts


# The first commit whose operator sweep checks every exported model with onnx.checker.
_CHECKER_SINCE = "a86ac2a"


def _checked(header: dict[str, Any]) -> bool:
    """Whether our records of this run went through the checker stage (runs from the commit that
    added it on; the commit is the run's first word)."""
    commit = str(header.get("commit", "")).split(" ")[0].removesuffix("-dirty")
    if not commit:
        return False
    result = subprocess.run(["git", "merge-base", "--is-ancestor", _CHECKER_SINCE, commit], cwd=REPO, capture_output=True)
    return result.returncode == 0


def _lost(records: Sequence[Record]) -> int:
    """Samples torch.onnx passes that torch_onnx_fx does not."""
    status = {(r.op, r.sample, r.exporter): r.status for r in records}
    return sum(
        1 for (op, sample, exporter), value in status.items()
        if exporter == THEIRS and value == "pass" and status.get((op, sample, OURS)) not in (None, "pass")
    )


def dtype_section(results: dict[str, tuple[dict[str, Any], list[Record]]]) -> str:
    """The "Every dtype" section of docs/coverage.md."""
    out = [
        START_MARKER,
        "## Every dtype",
        "",
        "Generated by `tools/sweeps/dtypesweep.py --summary` from `tools/results/opsweep_<dtype>.jsonl`; do not edit by "
        f"hand. The same sweep as above in every dtype OpInfo samples on CPU, {SAMPLES} samples per op, both "
        "exporters on the same captured programs. Integers and bools are compared exactly; complex outputs "
        "through their real view. A float16/bfloat16/float32 output outside eager's tolerance also passes where "
        "it is at least as close to the float64 result as eager is (ATen's CPU kernels accumulate some float16 "
        "ops in float16); the order statistics `topk`, `kthvalue`, `sort`, `argsort` pass with any tied index "
        "that selects the same values, and `linalg.eigh`'s eigenvectors are compared up to sign (phase). "
        "Samples whose captured program draws random numbers (dropout in training mode) are not counted. "
        "Every exported model is checked with `onnx.checker.check_model(full_check=True)` before it runs; one "
        "it rejects counts as `invalid_model`. "
        "*Silent mismatches* are exports that ran and gave wrong numbers: the failure this project must never have.",
        "",
        "| dtype | capturable samples | torch_onnx_fx pass | torch.onnx pass | torch_onnx_fx mismatches | torch.onnx mismatches | torch.onnx passes, we fail | torch_onnx_fx models valid (onnx.checker) | details |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    sections: list[str] = []
    for dtype in DTYPES:
        if dtype not in results:
            continue
        header, records = results[dtype]
        ours, theirs = _counts(records, OURS), _counts(records, THEIRS)
        total = sum(ours.values())
        total_theirs = sum(theirs.values())
        page = page_path(dtype)
        link = "above" if page == COVERAGE else f"[{page.name}]({page.name})"

        def rate(counts: dict[str, int], n: int) -> str:
            return f"{counts['pass']} ({100 * counts['pass'] / n:.1f}%)" if n else "–"

        ran = "not run" if not total else None
        # Models that reached the checker: every export that did not fail (older runs without the
        # checker stage have no invalid_model records and show "–").
        checked = header.get("checked", any(r.status == "invalid_model" for r in records)) or _checked(header)
        exported = total - ours["export_failed"] - ours["timeout"] - ours["crashed"]
        valid = f"{exported - ours['invalid_model']} / {exported}" if checked and total else "–"
        out.append(
            f"| {dtype} | {total or total_theirs} | {ran or rate(ours, total)} | {rate(theirs, total_theirs)} | "
            f"{ran or ours['mismatch']} | {theirs['mismatch'] if total_theirs else '–'} | "
            f"{_lost(records) if total_theirs and total else '–'} | {valid} | {link} |"
        )
        apart = sum(1 for r in records if r.exporter == OURS and r.status in APART)
        sections += [
            "",
            f"### {dtype}",
            "",
            f"Commit {header['commit']}, {header['date']}; {total} capturable samples ({apart} samples or ops not "
            f"counted: not capturable, rejected by eager, or skipped). Details: {link}.",
            "",
            "| status | torch_onnx_fx | torch.onnx |",
            "|---|---:|---:|",
            *[f"| {s} | {ours[s] if total else '–'} | {theirs[s] if total_theirs else '–'} |" for s in STATUSES],
        ]
    return "\n".join(out + sections + ["", END_MARKER]) + "\n"


def write_summary() -> None:
    results = {d: read_results(results_path(d)) for d in DTYPES if results_path(d).exists()}
    section = dtype_section(results)
    text = COVERAGE.read_text()
    start, end = text.find(START_MARKER), text.find(END_MARKER)
    if start >= 0 and end >= 0:
        text = text[:start] + section + text[end + len(END_MARKER) + 1:]
    else:
        from tools.sweeps.modelsweep import START_MARKER as MODELS

        models = text.find(MODELS)
        text = text[:models] + section + "\n" + text[models:] if models >= 0 else text + "\n" + section
    COVERAGE.write_text(text)


def _run(dtypes: Sequence[str], jobs: int, samples: int) -> None:
    for dtype in dtypes:
        command = [
            sys.executable, str(REPO / "tools" / "sweeps" / "opsweep.py"), "--jobs", str(jobs), "--samples", str(samples),
            "--dtype", dtype, "--json", str(results_path(dtype)), "--out", str(page_path(dtype)),
        ]
        subprocess.run(command, check=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", action="store_true", help="run the sweep for --dtypes, then write the summary")
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="comma-separated (default: all)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--samples", type=int, default=SAMPLES)
    parser.add_argument("--merge", nargs=2, type=Path, metavar=("FIRST", "SECOND"), help="join two runs of one dtype")
    parser.add_argument("--override", nargs="*", type=Path, default=[], help="runs whose ops replace the merged ones")
    parser.add_argument("--summary", action="store_true", help="rewrite the Every dtype section")
    options = parser.parse_args(argv)
    if options.merge:
        header, records = merge(*options.merge, options.override)
        _write_results(results_path(header["dtype"]), header, records)
        page = render_markdown(header, records)
        target = page_path(header["dtype"])
        if target == COVERAGE:
            from tools.sweeps.opsweep import _write_page

            _write_page(target, page)
        else:
            target.write_text(page)
    if options.run:
        _run([d for d in options.dtypes.split(",") if d], options.jobs, options.samples)
    if options.summary or options.run:
        write_summary()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
