"""Diagnostics of one export: ``report``, ``verify``, ``profile`` and ``dump_exported_program``.

An :class:`ExportSession` watches the export (it is told what each stage produced) and, when the
export ends — successfully or not — writes what was asked for into ``artifacts_dir``. File names
carry a timestamp so reports never overwrite each other.
"""

from __future__ import annotations

import collections
import contextlib
import cProfile
import datetime
import io
import logging
import os
import pstats
import traceback
from typing import Any, Iterator, Mapping

import torch

from torch_onnx_fx.diagnostics.verification import verify_onnx_program
from torch_onnx_fx.progress import Progress
from torch_onnx_fx.registry import target_name
from torch_onnx_fx.signature import ProgramSignature

__all__ = ["ExportSession", "session"]

logger = logging.getLogger(__name__)

class ExportSession:
    def __init__(
        self,
        model: Any,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        progress: Progress,
        *,
        report: bool,
        verify: bool,
        profile: bool,
        dump_exported_program: bool,
        artifacts_dir: str | os.PathLike[str],
    ):
        self.model = model
        self.args = args
        self.kwargs = kwargs
        self.progress = progress
        self.report = report
        self.profile = profile
        self.dump_exported_program = dump_exported_program
        self.artifacts_dir = os.fspath(artifacts_dir)
        self.stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S-%f")
        self.capture_result: Any = None
        self.decompose_result: Any = None
        self.table: Any = None
        self.program: Any = None
        self.verification: list[Any] | None = None
        self.error: BaseException | None = None
        self.profile_text: str | None = None
        self.files: list[str] = []

    def _path(self, suffix: str) -> str:
        os.makedirs(self.artifacts_dir, exist_ok=True)
        return os.path.join(self.artifacts_dir, f"onnx_export_{self.stamp}{suffix}")

    # -- notifications from export ----------------------------------------------------------

    def captured(self, result: Any) -> None:
        self.capture_result = result
        if self.dump_exported_program:
            path = self._path("_exported_program.pt2")
            torch.export.save(result.exported_program, path)
            text_path = self._path("_exported_program.txt")
            with open(text_path, "w", encoding="utf-8") as handle:
                handle.write(str(result.exported_program))
            self.files += [path, text_path]

    def decomposed(self, result: Any, table: Any) -> None:
        self.decompose_result = result
        self.table = table

    def exported(self, program: Any) -> None:
        self.program = program

    def verify(self, program: Any) -> str:
        self.verification = verify_onnx_program(program, self.args, self.kwargs)
        failed = [r for r in self.verification if not r.passed]
        worst = max((r.max_abs_diff for r in self.verification), default=0.0)
        if failed:
            logger.warning("verification: %d of %d outputs differ from PyTorch", len(failed), len(self.verification))
        return f"{len(self.verification) - len(failed)}/{len(self.verification)} outputs match, max abs diff {worst:.3g}"

    # -- the report ---------------------------------------------------------------------------

    def _histogram(self) -> list[tuple[str, int, str]]:
        program = (self.decompose_result or self.capture_result)
        if program is None:
            return []
        graph = program.exported_program.graph
        counts: collections.Counter[Any] = collections.Counter(
            n.target for n in graph.nodes if n.op == "call_function"
        )
        rows = []
        for target, count in counts.most_common():
            source = self.table.source_of(target) if self.table is not None else None
            rows.append((target_name(target), count, source or "**no translation**"))
        return rows

    def _io_section(self) -> list[str]:
        """Inputs and outputs with dtypes and (symbolic) shapes: of the ONNX model if it exists."""
        if self.program is not None:
            graph = self.program.model.graph

            def describe(value: Any) -> str:
                dims = ", ".join(str(d) for d in value.shape) if value.shape is not None else "?"
                return f"`{value.name}`: {value.dtype.name if value.dtype is not None else '?'}[{dims}]"

            inputs, outputs = [describe(v) for v in graph.inputs], [describe(v) for v in graph.outputs]
        elif self.capture_result is not None:
            signature = ProgramSignature.of(self.capture_result.exported_program)

            def describe_node(node: torch.fx.Node) -> str:
                value = node.meta.get("val")
                shape = list(value.shape) if isinstance(value, torch.Tensor) else value
                return f"`{node.name}`: {getattr(value, 'dtype', '')} {shape}"

            inputs = [describe_node(node) for node, _ in signature.user_inputs]
            outputs = [f"`{entry.arg.name}`" for entry in signature.graph_outputs() if isinstance(entry.arg, torch.fx.Node)]
        else:
            return []
        return ["", "Inputs:", *[f"- {i}" for i in inputs], "", "Outputs:", *[f"- {o}" for o in outputs]]

    def write_report(self) -> str:
        lines = [f"# torch_onnx_fx export report ({self.stamp})", ""]
        status = "failed" if self.error else "succeeded"
        lines += [f"Export **{status}**.", "", "## Phases", "", "| phase | status | seconds | detail |", "|---|---|---|---|"]
        for phase in self.progress.phases:
            lines.append(f"| {phase.name} | {'ok' if phase.ok else 'FAILED'} | {phase.seconds:.3f} | {phase.detail} |")
        lines += ["", "## Capture strategies", ""]
        failures = list(getattr(self.capture_result, "failures", []) or getattr(self.error, "failures", []) or [])
        for strategy, exc in failures:
            lines.append(f"- `{strategy}`: failed: `{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}`")
        if self.capture_result is not None:
            lines.append(f"- `{self.capture_result.strategy}`: succeeded")
        if self.capture_result is not None:
            program = self.capture_result.exported_program
            by_dtype: collections.Counter[str] = collections.Counter()
            count = 0
            for tensor in program.state_dict.values():
                by_dtype[str(tensor.dtype)] += tensor.numel() * tensor.element_size()
                count += tensor.numel()
            lines += ["", "## Model", "", f"Parameters and buffers: {count:,} elements."]
            for dtype, size in by_dtype.items():
                lines.append(f"- {dtype}: {size:,} bytes")
            lines += ["", f"Range constraints: `{program.range_constraints}`"]
        conditions = getattr(self.program, "size_conditions", None)
        if conditions:
            lines += ["", "## Size conditions", "", "The graph is valid only for inputs where (program(...) refuses others):", ""]
            lines += [f"- `{condition}`" for condition in conditions]
        lines += self._io_section()
        histogram = self._histogram()
        if histogram:
            lines += ["", "## Operators", "", "| operator | count | translation |", "|---|---|---|"]
            lines += [f"| `{name}` | {count} | {source} |" for name, count, source in histogram]
        if self.verification is not None:
            lines += ["", "## Verification", "", "| output | max abs diff | max rel diff | expected dtype | actual dtype | passed |", "|---|---|---|---|---|---|"]
            for r in self.verification:
                lines.append(
                    f"| {r.name} | {r.max_abs_diff:.3g} | {r.max_rel_diff:.3g} | {r.expected_dtype} | {r.actual_dtype} | {r.passed} |"
                )
        if self.error is not None:
            lines += ["", "## Error", "", "```", "".join(traceback.format_exception(self.error)).strip(), "```"]
        if self.profile_text:
            lines += ["", "## Profile", "", "```", self.profile_text.strip(), "```"]
        if self.files:
            lines += ["", "## Artifacts", ""] + [f"- `{p}`" for p in self.files]
        path = self._path(f"_{'failure' if self.error else 'success'}.md")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
        return path


class _Profiler:
    """pyinstrument's sampling profiler when installed (low overhead, readable call tree),
    else cProfile's top 30 functions by cumulative time."""

    def __init__(self) -> None:
        try:
            import pyinstrument
        except ImportError:
            self._sampler = None
            self._profile = cProfile.Profile()
        else:
            self._sampler = pyinstrument.Profiler()

    def start(self) -> None:
        if self._sampler is not None:
            self._sampler.start()
        else:
            self._profile.enable()

    def stop(self) -> str:
        if self._sampler is not None:
            self._sampler.stop()
            return self._sampler.output_text(unicode=False, color=False)
        self._profile.disable()
        buffer = io.StringIO()
        pstats.Stats(self._profile, stream=buffer).sort_stats("cumulative").print_stats(30)
        return buffer.getvalue()


@contextlib.contextmanager
def session(
    model: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any], progress: Progress, **options: Any
) -> Iterator[ExportSession]:
    """Run the export body under an :class:`ExportSession`; write artifacts at the end."""
    state = ExportSession(model, args, kwargs, progress, **options)
    profiler = _Profiler() if state.profile else None
    if profiler is not None:
        profiler.start()
    try:
        yield state
    except BaseException as exc:
        state.error = exc
        raise
    finally:
        if profiler is not None:
            state.profile_text = profiler.stop()
            if not state.report:
                path = state._path("_profile.txt")
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(state.profile_text)
                logger.info("profile written to %s", path)
        if state.report:
            path = state.write_report()
            if progress.enabled:
                print(f"[torch_onnx_fx] report written to {path}")
