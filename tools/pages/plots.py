"""Charts of the benchmark and the two sweeps for the documentation: PNG files in ``docs/img/``.

Reads the committed results through the readers of the tools that write them (``tools/benchmarks/bench.py``,
``tools/sweeps/opsweep.py``, ``tools/sweeps/modelsweep.py``) and draws:

- ``bench_ratios.png``: torch_onnx_fx / torch.onnx per model for export time, peak RSS, node count
  and ONNX Runtime latency, on a log scale with 1.0 and the geometric mean marked;
- ``opsweep_status.png``: the operator sweep's samples of each status, per exporter;
- ``opsweep_causes.png``: torch_onnx_fx's most frequent failure causes in the operator sweep;
- ``modelsweep_families.png``: the model sweep's statuses per exporter and model family.

The page generators write the lines that show them (``docs/benchmarks.md``, ``docs/coverage.md``);
this tool only draws. Redraw after regenerating a page::

    pip install -e '.[plots]' && python tools/pages/plots.py

matplotlib is an optional extra: neither the package nor its tests need it. The files are
deterministic: the same results and matplotlib version give the same bytes (matplotlib's default
style whatever the local matplotlibrc says, and no version stamp in the PNG).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import math
import re
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools._common import (  # noqa: E402
    BENCH_RATIOS_PNG, IMAGE_DIR, MODELSWEEP_FAMILIES_PNG, OPSWEEP_CAUSES_PNG, OPSWEEP_STATUS_PNG, PLOTS_COMMAND,
)
from tools.benchmarks.bench_worker import EXPORTERS, OURS  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from tools.sweeps.opsweep import Record as OpRecord

__all__ = [
    "BENCH_JSON", "OPSWEEP_JSON", "MODELSWEEP_JSON", "draw_bench_ratios", "draw_opsweep_status",
    "draw_opsweep_causes", "draw_modelsweep_families", "render_all", "main",
]

RESULTS = REPO / "tools" / "results"
BENCH_JSON = RESULTS / "bench.jsonl"
OPSWEEP_JSON = RESULTS / "opsweep_float32.jsonl"
MODELSWEEP_JSON = RESULTS / "modelsweep.jsonl"

DPI = 100
# Applied over matplotlib's default style, so a local matplotlibrc cannot change the files.
_STYLE = {
    "font.size": 9, "axes.titlesize": 10, "figure.titlesize": 11, "axes.spines.top": False, "axes.spines.right": False,
}
# One colour per status in every chart: green passes, the failures in colours that tell them apart.
STATUS_COLORS = {
    "pass": "#4d9a3a",
    "mismatch": "#e8a33d",
    "export_failed": "#cf4a43",
    "invalid_model": "#d46fa8",
    "ort_failed": "#8a63b8",
    "timeout": "#8c8c8c",
    "crashed": "#3a3a3a",
    "build_failed": "#a0643c",
}
# The benchmark's metrics drawn, of tools.benchmarks.bench.RATIOS (warm export time is on the page only).
BENCH_METRICS = ("export time", "peak RSS", "nodes", "ORT latency")
GEOMEAN_COLOR = "#1f5fa8"
TOP_CAUSES = 12


# -- the benchmark ---------------------------------------------------------------------------------


def draw_bench_ratios(path: Path = BENCH_JSON) -> Figure:
    """A dot per model and metric, models grouped by family, on one log axis for all metrics."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    from tools.benchmarks import bench

    _, runs = bench.read_results(path)
    pairs = bench.handled_by_both(bench.pairs_by_model(bench.combine_runs(runs)))
    columns = bench.ratio_columns(pairs)
    families = list(dict.fromkeys(pair[OURS].family for pair in pairs.values()))
    # Families together, each in corpus order (a model re-run with --merge comes back to its family).
    models = sorted(pairs, key=lambda model: families.index(pairs[model][OURS].family))
    family_color = {family: colormaps["tab10"](i % 10) for i, family in enumerate(families)}
    colors = [family_color[pairs[model][OURS].family] for model in models]
    rows = range(len(models))

    values = [ratio for metric in BENCH_METRICS for ratio in columns[metric].values() if ratio is not None]
    # Symmetric about 1 in powers of 2, the same for every metric so their spreads compare.
    reach = max((abs(math.log2(ratio)) for ratio in values), default=1.0)
    power = max(1, math.ceil(reach + 0.1))
    ticks = [2.0**k for k in range(-power, power + 1)]

    figure = Figure(figsize=(11, 1.9 + 0.155 * len(models)), layout="constrained")
    axes = figure.subplots(1, len(BENCH_METRICS), sharey=True)
    for ax, metric in zip(axes, BENCH_METRICS):
        ratios = [columns[metric][model] for model in models]
        shown = [(ratio, row, color) for ratio, row, color in zip(ratios, rows, colors) if ratio is not None]
        _shade_groups(ax, [pairs[model][OURS].family for model in models])
        ax.axvline(1.0, color="black", linewidth=0.9, zorder=2)
        mean, count = bench.geomean(ratios)
        if mean is not None:
            ax.axvline(mean, color=GEOMEAN_COLOR, linestyle="--", linewidth=1.3, zorder=2)
        ax.scatter([r for r, _, _ in shown], [row for _, row, _ in shown], c=[c for _, _, c in shown], s=16, zorder=3)
        ax.set_xscale("log", base=2)
        ax.set_xlim(ticks[0], ticks[-1])
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.grid(axis="x", color="#d0d0d0", linewidth=0.6, zorder=0)
        ax.set_title(f"{metric}\ngeometric mean {mean:.2f} (n={count})" if mean is not None else metric)
        ax.set_xlabel("ratio, log scale")
    axes[0].set_yticks(list(rows), models, fontsize=7.5)
    axes[0].set_ylim(len(models) - 0.5, -0.5)
    axes[0].tick_params(axis="y", length=0)
    handles = [Line2D([], [], color="black", linewidth=0.9, label="1 = as torch.onnx")]
    handles.append(Line2D([], [], color=GEOMEAN_COLOR, linestyle="--", linewidth=1.3, label="geometric mean"))
    handles += [
        Line2D([], [], marker="o", linestyle="", color=color, markersize=5, label=family)
        for family, color in family_color.items()
    ]
    figure.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 5), frameon=False)
    figure.suptitle(
        f"torch_onnx_fx / torch.onnx per model ({len(models)} models both export): below 1, torch_onnx_fx is "
        "faster, leaner or smaller"
    )
    return figure


def _shade_groups(ax: Axes, groups: Sequence[str]) -> None:
    """Shade every other run of equal neighbours (the families), so rows read as groups."""
    start = 0
    for index, (_, run) in enumerate(itertools.groupby(groups)):
        end = start + len(list(run))
        if index % 2:
            ax.axhspan(start - 0.5, end - 0.5, color="#f1f1f1", zorder=0, linewidth=0)
        start = end


# -- the operator sweep ----------------------------------------------------------------------------


def draw_opsweep_status(path: Path = OPSWEEP_JSON) -> Figure:
    """One bar per exporter, its samples stacked by status, with the pass rate."""
    from matplotlib.figure import Figure

    from tools.sweeps import opsweep

    header, records = opsweep.read_results(path)
    exporters = [e for e in EXPORTERS if e in header["exporters"]]
    counts = opsweep.status_counts(records, exporters)
    figure = Figure(figsize=(10, 1.5 + 0.55 * len(exporters)), layout="constrained")
    ax = figure.subplots()
    present = _stacked_bars(ax, exporters, [counts[e] for e in exporters], opsweep.STATUSES)
    for row, exporter in enumerate(exporters):
        total = sum(counts[exporter].values())
        if total:
            ax.text(total * 1.01, row, f"{100 * counts[exporter]['pass'] / total:.1f}% pass", va="center")
    ax.set_xlim(0, max(sum(c.values()) for c in counts.values()) * 1.13)
    ax.set_xlabel(f"samples ({header['dtype']}, the first {header['samples']} sample inputs of each OpInfo)")
    ax.set_title(f"Operator sweep: status of each capturable sample, per exporter ({len(set(header['ops']))} OpInfos)")
    _status_legend(figure, present)
    return figure


def draw_opsweep_causes(path: Path = OPSWEEP_JSON) -> Figure:
    """torch_onnx_fx's failures by cause, most frequent first, coloured by status."""
    from matplotlib.figure import Figure

    from tools.sweeps import opsweep

    header, records = opsweep.read_results(path)
    failures = opsweep.failures_of(opsweep.in_page_order(header, records), OURS)
    groups = opsweep.failures_by_cause(failures)
    top = groups[:TOP_CAUSES]
    figure = Figure(figsize=(10, 1.4 + 0.48 * len(top)), layout="constrained")
    ax = figure.subplots()
    counts = [len(members) for _, members in top]
    ax.barh(range(len(top)), counts, color=[STATUS_COLORS[members[0].status] for _, members in top], zorder=2)
    for row, count in enumerate(counts):
        ax.text(count + max(counts, default=1) * 0.01, row, str(count), va="center")
    ax.set_yticks(range(len(top)), [_cause_label(cause, members) for cause, members in top], fontsize=7.5)
    ax.set_ylim(len(top) - 0.5, -0.5)
    ax.tick_params(axis="y", length=0)
    ax.set_xlim(0, max(counts, default=1) * 1.08)
    ax.grid(axis="x", color="#d0d0d0", linewidth=0.6, zorder=0)
    ax.set_xlabel("failing samples")
    rest = groups[TOP_CAUSES:]
    others = f"; {len(rest)} more causes with {sum(len(m) for _, m in rest)} samples not shown" if rest else ""
    ax.set_title(
        f"Operator sweep: torch_onnx_fx's {len(failures)} failing samples by cause\n"
        f"the {len(top)} most frequent of {len(groups)}{others}"
    )
    _status_legend(figure, list(dict.fromkeys(members[0].status for _, members in top)))
    return figure


# Prefixes that ONNX Runtime and the exporter put before the part of a message that tells causes apart.
_BOILERPLATE = re.compile(
    r"ONNX Runtime failed to run the model: |\[ONNXRuntimeError\] : N : FAIL : |Non-zero status code returned while "
    r"running |Decomposing operators without an ONNX translation failed \("
)


def _cause_label(cause: str, members: Sequence[OpRecord]) -> str:
    """Two lines of the cause at most, then the ops it hits."""
    lines = textwrap.wrap(_BOILERPLATE.sub("", cause), width=78, max_lines=2, placeholder=" …")
    ops = list(dict.fromkeys(r.op for r in members))
    listed = ", ".join(ops[:4]) + (f", … ({len(ops)} ops)" if len(ops) > 4 else "")
    return "\n".join([*lines, "ops: " + listed])


# -- the model sweep -------------------------------------------------------------------------------


def draw_modelsweep_families(path: Path = MODELSWEEP_JSON) -> Figure:
    """A panel per exporter: a bar per model family, its models stacked by status."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    from tools.sweeps import modelsweep

    _, records = modelsweep.read_results(path)
    families = list(dict.fromkeys(r.family for r in records))
    by_family: dict[str, dict[str, collections.Counter[str]]] = {
        e: {f: collections.Counter(r.status for r in records if r.exporter == e and r.family == f) for f in families}
        for e in EXPORTERS
    }
    sizes = {f: len({r.model for r in records if r.family == f}) for f in families}
    figure = Figure(figsize=(10, 1.7 + 0.34 * len(families)), layout="constrained")
    axes = figure.subplots(1, len(EXPORTERS), sharey=True, sharex=True)
    present: list[str] = []
    for ax, exporter in zip(axes, EXPORTERS):
        counts = [by_family[exporter][f] for f in families]
        labels = [f"{family} ({sizes[family]})" for family in families]
        present += _stacked_bars(ax, labels, counts, modelsweep.STATUSES)
        for row, counter in enumerate(counts):
            ax.text(sum(counter.values()) + 0.3, row, f"{counter['pass']}/{sum(counter.values())}", va="center")
        passed = sum(c["pass"] for c in counts)
        ax.set_title(f"{exporter}: {passed} of {sum(sum(c.values()) for c in counts)} pass")
        ax.set_xlabel("models")
    axes[0].set_xlim(0, max(sizes.values(), default=1) * 1.15)
    axes[0].xaxis.set_major_locator(MaxNLocator(integer=True))
    models = len({r.model for r in records})
    figure.suptitle(f"Model sweep: status of each model per exporter, by family ({models} models)")
    _status_legend(figure, list(dict.fromkeys(present)))
    return figure


# -- shared drawing --------------------------------------------------------------------------------


def _stacked_bars(
    ax: Axes, labels: Sequence[str], counts: Sequence[collections.Counter[str]], statuses: Sequence[str]
) -> list[str]:
    """Horizontal bars, top to bottom, each stacked by status in ``statuses`` order; segments wide
    enough show their count. Returns the statuses drawn, for the legend."""
    largest = max((sum(c.values()) for c in counts), default=1) or 1
    drawn: list[str] = []
    for row, counter in enumerate(counts):
        left = 0
        for status in statuses:
            count = counter[status]
            if not count:
                continue
            ax.barh(row, count, left=left, color=STATUS_COLORS[status], edgecolor="white", linewidth=0.5, zorder=2)
            if count / largest > 0.04:
                ax.text(left + count / 2, row, str(count), ha="center", va="center", color="white", fontsize=8)
            left += count
            drawn.append(status)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.tick_params(axis="y", length=0)
    ax.grid(axis="x", color="#d0d0d0", linewidth=0.6, zorder=0)
    return list(dict.fromkeys(drawn))


def _status_legend(figure: Figure, statuses: Sequence[str]) -> None:
    from matplotlib.patches import Patch

    order = list(STATUS_COLORS)
    handles = [Patch(color=STATUS_COLORS[s], label=s) for s in sorted(set(statuses), key=order.index)]
    figure.legend(handles=handles, loc="outside lower center", ncol=len(handles), frameon=False)


# -- the driver ------------------------------------------------------------------------------------

CHARTS: dict[str, Callable[[], Figure]] = {
    BENCH_RATIOS_PNG: draw_bench_ratios,
    OPSWEEP_STATUS_PNG: draw_opsweep_status,
    OPSWEEP_CAUSES_PNG: draw_opsweep_causes,
    MODELSWEEP_FAMILIES_PNG: draw_modelsweep_families,
}


def render_all(out_dir: Path = IMAGE_DIR) -> list[Path]:
    """Draw every chart from the committed results into ``out_dir``; the files written."""
    import matplotlib
    import matplotlib.style
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with matplotlib.style.context("default"), matplotlib.rc_context({**_STYLE, "figure.dpi": DPI}):
        for name, draw in CHARTS.items():
            pixels, size = FigureCanvasAgg(draw()).print_to_buffer()
            # A 256-colour palette (median cut, deterministic) keeps a chart's looks at a third of
            # the bytes of matplotlib's RGBA file; Pillow writes no version or time into it.
            image = Image.frombuffer("RGBA", size, pixels, "raw", "RGBA", 0, 1).convert("RGB").quantize(256)
            path = out_dir / name
            image.save(path, optimize=True)
            written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=IMAGE_DIR, help="where the PNG files go (default docs/img)")
    options = parser.parse_args(argv)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        parser.error(f"the charts need matplotlib, an optional extra: {PLOTS_COMMAND}")
    for path in render_all(options.out_dir):
        print(f"{path} ({path.stat().st_size / 1024:.0f} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
