"""Pages written from declarations are what their tools would write now."""

from __future__ import annotations

from tools.pages import arguments
from torch_onnx_fx import options


def test_the_migration_pages_argument_table_is_written_from_exports_declaration():
    current = arguments.PAGE.read_text()
    assert arguments.page_text(current) == current, "run python tools/pages/arguments.py"
    for field in options.arguments():
        assert f"| `{field.name}`" in current
