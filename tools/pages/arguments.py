"""The argument table of ``docs/migration.md``, written from ``export``'s declaration.

Every argument of ``torch_onnx_fx.export`` is declared once, with its documentation, as a field
of ``torch_onnx_fx.options.ExportOptions``; this writes the table between the page's markers from
that declaration, so the page cannot drift from the code (``tests/tooling/test_pages.py`` checks
that it has not). Regenerate after adding or changing an argument::

    python tools/pages/arguments.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools._common import replace_section  # noqa: E402
from torch_onnx_fx import options  # noqa: E402

__all__ = ["PAGE", "START", "END", "render", "main"]

PAGE = REPO / "docs" / "migration.md"
START = "<!-- arguments: written by python tools/pages/arguments.py from torch_onnx_fx/options.py; do not edit by hand -->"
END = "<!-- /arguments -->"
_ORIGIN = {options.OURS: " (ours only)", options.LEGACY_KIND: " (legacy)"}


def render() -> str:
    """The section, markers included: one row per argument, in signature order."""
    rows = ["| argument | behaviour in torch_onnx_fx |", "|---|---|", f"| `model` | {options.MODEL_DOC} |"]
    for field in options.arguments():
        rows.append(f"| `{field.name}`{_ORIGIN.get(field.metadata['kind'], '')} | {field.metadata['doc']} |")
    return "\n".join([START, *rows, END])


def page_text(current: str) -> str:
    written = replace_section(current, START, END, render())
    if written is None:
        raise SystemExit(f"{PAGE.relative_to(REPO)} has no {START!r} ... {END!r} section to write")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is not what this would write")
    options_ = parser.parse_args(argv)
    current = PAGE.read_text()
    written = page_text(current)
    if options_.check:
        return int(written != current)
    PAGE.write_text(written)
    return 0


if __name__ == "__main__":
    sys.exit(main())
