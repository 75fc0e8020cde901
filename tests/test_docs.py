"""The documentation builds without warnings and its examples run."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(REPO, "docs")
FRAGMENT = "<!-- fragment"


def _examples() -> list[tuple[str, int, str]]:
    """Every ```python block of the docs not marked as a fragment: (page, line, code)."""
    found = []
    for page in sorted(os.listdir(DOCS)):
        if not page.endswith(".md"):
            continue
        text = open(os.path.join(DOCS, page), encoding="utf-8").read()
        for match in re.finditer(r"(?P<before>[^\n]*)\n```python\n(?P<code>.*?)```", "\n" + text, re.S):
            if match.group("before").startswith(FRAGMENT):
                continue
            line = text[: match.start("code")].count("\n")
            found.append((page, line, match.group("code")))
    return found


@pytest.mark.parametrize("page, line, code", _examples(), ids=lambda v: str(v) if not isinstance(v, str) or len(v) < 40 else "code")
def test_documentation_example_runs(page, line, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that save files write them here
    namespace: dict = {"__name__": f"docs_{page}"}
    exec(compile(code, f"{page}:{line}", "exec"), namespace)


def test_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_page_is_in_the_site_navigation():
    # Ten coverage pages were built but reachable from no menu.
    nav = open(os.path.join(REPO, "mkdocs.yml"), encoding="utf-8").read()
    listed = set(re.findall(r":\s*([\w./-]+\.md)\s*$", nav, re.M))
    pages = {page for page in os.listdir(DOCS) if page.endswith(".md")}
    assert pages - listed == set(), "pages missing from mkdocs.yml's nav"
    assert listed - pages == set(), "nav entries without a page"


def test_contributing_says_how_to_build_the_site():
    text = open(os.path.join(REPO, "CONTRIBUTING.md"), encoding="utf-8").read()
    assert "mkdocs build --strict" in text and "mkdocs serve" in text
