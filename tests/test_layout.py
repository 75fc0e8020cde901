"""The package's layout: stages as subpackages, imports only toward earlier stages, no circle.

Every import of the package's own modules counts, those inside functions and under
``TYPE_CHECKING`` too: a circle closed by a deferred import is still one a reader has to
untangle. CONTRIBUTING.md says where new code goes; this test says where it may import from.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "torch_onnx_fx"
# Records every stage may read; they import only each other.
SHARED = {"_state", "errors", "dtypes", "signature", "registry", "progress"}
# The pipeline's stages, in the order data flows through them.
STAGES = ["capture", "normalize", "translate", "ops", "optimize", "program", "diagnostics"]
# The public entries at the top, which compose the stages.
ENTRIES = {"__init__", "__main__", "export", "options", "exportable", "testing", "verification", "cli", "demo", "integrations"}
MAX_LOOSE_MODULES = 15
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules ``name`` imports (``from pkg import x`` counts as ``pkg.x`` when
    that is a module, else as ``pkg``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if package else []
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = (node.module or "").removeprefix("torch_onnx_fx").lstrip(".")
                if not (node.module or "").startswith("torch_onnx_fx"):
                    continue
            targets = [f"{module}.{a.name}".lstrip(".") if f"{module}.{a.name}".lstrip(".") in known else module for a in node.names]
        else:
            continue
        for target in targets:
            target = target.removeprefix("torch_onnx_fx").lstrip(".") or "__init__"
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


MODULES = _modules()
GRAPH = {name: _imports(name, path, set(MODULES)) for name, path in MODULES.items()}


def _layer(name: str) -> tuple[str, int]:
    top = name.split(".")[0]
    if top in SHARED:
        return "shared", -1
    if top in STAGES:
        return top, STAGES.index(top)
    assert top in ENTRIES, f"{name} is a loose module that is neither a shared record, a stage nor an entry"
    return "entry", len(STAGES)


def test_no_import_circle():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for name in GRAPH:
        if name not in index:
            visit(name)
    assert circles == []


@pytest.mark.parametrize("name", sorted(n for n in GRAPH if _layer(n)[0] != "entry"))
def test_imports_run_toward_earlier_stages_and_shared_records(name):
    kind, position = _layer(name)
    for imported in GRAPH[name]:
        other_kind, other_position = _layer(imported)
        if kind == "shared":
            assert other_kind == "shared", f"shared record {name} imports {imported}"
        else:
            assert other_kind == "shared" or other_position <= position, f"{name} ({kind}) imports {imported}, a later stage"


def test_the_top_holds_few_loose_modules_and_every_stage_is_a_subpackage():
    loose = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert len(loose) <= MAX_LOOSE_MODULES, loose
    assert all((PACKAGE / stage / "__init__.py").exists() for stage in STAGES)


def test_no_module_is_past_the_style_guides_length():
    long = {name: n for name, path in MODULES.items() if (n := path.read_text().count("\n")) > MAX_LINES}
    assert long == {}
