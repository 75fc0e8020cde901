"""The documentation's charts (tools/pages/plots.py): drawn from the committed results, shown by the pages."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from tools import _common
from tools.pages import plots

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def charts(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    pytest.importorskip("matplotlib", reason=f"the charts need matplotlib, an optional extra: {_common.PLOTS_COMMAND}")
    return plots.render_all(tmp_path_factory.mktemp("img"))


def test_charts_are_small_valid_pngs(charts: list[Path]) -> None:
    assert sorted(path.name for path in charts) == sorted(_common.PLOTS)
    for path in charts:
        data = path.read_bytes()
        assert data.startswith(PNG_SIGNATURE), f"{path.name} is not a PNG"
        assert data.endswith(b"IEND\xaeB`\x82"), f"{path.name} is truncated"
        # The header chunk comes first: its width and height follow the chunk's length and type.
        assert data[12:16] == b"IHDR"
        width, height = struct.unpack(">II", data[16:24])
        assert width >= 800 and height >= 200, f"{path.name} is {width}x{height}"
        assert 5 * 1024 < len(data) < 150 * 1024, f"{path.name} has {len(data)} bytes"


def test_charts_are_deterministic(charts: list[Path], tmp_path: Path) -> None:
    again = plots.render_all(tmp_path)
    for first, second in zip(charts, again):
        assert first.read_bytes() == second.read_bytes(), f"{first.name} differs between two runs"


def test_pages_show_every_chart() -> None:
    """The page generators write the image lines: every chart is on a page, and only charts are."""
    shown = []
    for page in ("benchmarks.md", "coverage.md"):
        shown += re.findall(r"!\[[^\]]*\]\(img/([^)]+)\)", (_common.REPO / "docs" / page).read_text())
    assert sorted(shown) == sorted(_common.PLOTS)
    assert all((_common.IMAGE_DIR / name).is_file() for name in shown)
