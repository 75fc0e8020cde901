"""Model sweep: every model of the corpus (``tools/corpus/models.py``) through both ONNX exporters.

Each model is exported with its dynamic shapes by ``torch_onnx_fx.export`` and by
``torch.onnx.export(..., dynamo=True)``, each export in its own worker process with a timeout;
both ONNX models run in ONNX Runtime (through ``ONNXProgram.__call__``) on the model's example
inputs and on its second input set of other dynamic sizes, and are compared with eager PyTorch
by the check ``tests/models/test_corpus.py`` uses (dtype, shape, then ``assert_close`` with the case's
rtol/atol). Each (model, exporter) gets one status: pass, mismatch, export_failed, ort_failed,
timeout; or crashed (the worker died) and build_failed (the corpus case itself failed in eager).

Results go to a JSON-lines file and to the ``## Model corpus`` section of ``docs/coverage.md``,
between the markers ``<!-- modelsweep:start -->`` and ``<!-- modelsweep:end -->`` (appended if
missing); the rest of that page belongs to the operator sweep and is left as it is.

Regenerate (about 20 minutes on 2 cores)::

    python tools/sweeps/modelsweep.py

``--models a,b`` runs only those models and merges their records into the existing results
(``--unmeasured``: only the models without a record yet, so a long sweep completes in pieces);
``--render-only`` rewrites the section from the JSON-lines file; ``tools/pages/plots.py`` draws the
section's chart from the same file. The torchvision models need another torch, so they are swept
from their own environment into their own file, ``tools/results/modelsweep_torchvision.jsonl``,
which every rendering reads for the section's "torchvision models" table (see its how-to).

``--corpus transformers|torchvision|timm|diffusers`` sweeps a generated corpus instead (``GENERATED``:
every transformers architecture per task head, every torchvision model, the first variant of every
timm family, diffusers' denoisers and autoencoders), each into its own results file and page; every
run also rewrites the per-source table of ``docs/coverage.md``.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import importlib
import importlib.util
import json
import math
import multiprocessing
import os
import re
import shlex
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO, REPO / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from tools._common import (  # noqa: E402
    MODELSWEEP_FAMILIES_PNG, PLOTS_COMMAND, describe_versions, image, machine_info, replace_section, run_in_worker, read_records, write_records,
)

__all__ = [
    "Record", "STATUSES", "EXPORTERS", "run_case", "sweep", "read_results", "render_section", "write_section", "main",
]

OURS = "torch_onnx_fx"
THEIRS = "torch.onnx"
EXPORTERS = (OURS, THEIRS)
STATUSES = ("pass", "mismatch", "export_failed", "invalid_model", "ort_failed", "timeout", "crashed", "build_failed")
START_MARKER = "<!-- modelsweep:start -->"
END_MARKER = "<!-- modelsweep:end -->"
DEFAULT_JSON = REPO / "tools" / "results" / "modelsweep.jsonl"
DEFAULT_PAGE = REPO / "docs" / "coverage.md"
TORCHVISION_JSON = REPO / "tools" / "results" / "modelsweep_torchvision.jsonl"
TORCHVISION_MODELS = tuple(
    f"torchvision-{name}" for name in (
        "resnet18", "mobilenet_v3_small", "efficientnet_b0", "vit_b_16", "convnext_tiny", "swin_t", "regnet_y_400mf",
        "densenet121",
    )
)


@dataclasses.dataclass(frozen=True)
class Generated:
    """A generated corpus: the module listing its cases (``cases()``), the
    prefix of its case names, where its results and page go, and what its page says of it."""

    key: str
    module: str
    prefix: str
    title: str
    intro: str
    environment: str = ""
    results: str = ""  # the results file's name, when not modelsweep_<key>.jsonl

    @property
    def json(self) -> Path:
        return REPO / "tools" / "results" / (self.results or f"modelsweep_{self.key}.jsonl")

    @property
    def page(self) -> Path:
        return REPO / "docs" / f"coverage_{self.key}.md"


_VISION_ENV = (
    "It needs torchvision, which requires torch 2.14.1: it runs from a separate environment, "
    "`python -m venv /tmp/vision && /tmp/vision/bin/pip install torch==2.14.1 torchvision==0.29.1 timm "
    "&& /tmp/vision/bin/pip install -e '.[test]'`, with `/tmp/vision/bin/python` in place of `python` below."
)

GENERATED = {
    "transformers": Generated(
        "transformers", "tools.corpus.generated_models", "hf-", "Generated transformers corpus",
        "Every (model type, task head) of transformers' auto mappings (`tools/corpus/generated_models.py`: base model, "
        "causal LM, masked LM, sequence classification, seq2seq LM, image classification), built offline from its "
        "config class with small sizes and random weights, called with token ids and an attention mask (batch and "
        "sequence dynamic), raw audio (batch and samples dynamic) or pixel values (batch dynamic); special token ids "
        "moved inside the small vocabulary, sampling noise (VITS) set to zero so eager is a function of its inputs. "
        "Models that cannot be built from a config offline, or that eager PyTorch cannot run on those inputs, are "
        "`build_failed`: listed, not counted in the pass rate.",
    ),
    "torchvision": Generated(
        "torchvision", "tools.corpus.torchvision_models", "tv-", "Generated torchvision corpus",
        "Every model of `torchvision.models.list_models()` (`tools/corpus/torchvision_models.py`): classification, "
        "quantized (built with `quantize=True`), segmentation, video and optical flow, random weights with "
        "BatchNorm statistics calibrated on random inputs, called on random inputs of the published size with "
        "a dynamic batch (2, then 3), compared with eager at rtol 1e-3 / atol 1e-5 (torchvision's own ONNX-test "
        "tolerance). The detection models are checked by `tools/sweeps/detection_check.py` as sets of detections, on "
        "images with and without detections: see [detection models](coverage_detection.md).",
        _VISION_ENV,
        # modelsweep_torchvision.jsonl holds the hand-picked corpus's eight torchvision models.
        results="modelsweep_torchvision_all.jsonl",
    ),
    "timm": Generated(
        "timm", "tools.corpus.timm_models", "timm-", "Generated timm corpus",
        "The first variant of every model family (module) of `timm.list_models()` (`tools/corpus/timm_models.py`), "
        "random weights with BatchNorm statistics calibrated on random images, called on random images of its "
        "published input size with a dynamic batch (2, then 3), compared with eager at rtol 1e-3 / atol 1e-5.",
        _VISION_ENV,
    ),
    "diffusers": Generated(
        "diffusers", "tools.corpus.diffusers_models", "diff-", "Generated diffusers corpus",
        "diffusers' denoisers and autoencoders from small configs with random weights "
        "(`tools/corpus/diffusers_models.py`, the sizes of diffusers' own test models): the UNets, the autoencoders "
        "(AutoencoderKL as its encoder and decoder, the others image to reconstruction), the transformer backbones "
        "and the ControlNets, batch dynamic where the model allows, compared with eager at rtol 1e-3 / atol 1e-5 "
        "or, where that fails, with eager in float64 (as close to it as eager's float32 outputs). "
        "Needs `pip install diffusers` (not a test dependency).",
    ),
}


@dataclasses.dataclass
class Record:
    """One exporter on one model. ``error`` is the exception's type and first line, ``cause`` that
    of its innermost cause when it wraps one; ``max_abs_diff`` is over every input set compared."""

    model: str
    family: str
    exporter: str
    ci: bool
    status: str = "crashed"
    stage: str = "start"
    error: str | None = None
    cause: str | None = None
    export_s: float | None = None
    max_abs_diff: float | None = None
    input_sets: int = 0
    note: str | None = None
    run: int = 0


# -- one model and exporter, in a worker process --------------------------------------------------


def stage_tracking(record: Any, on_stage: Callable[[Any], None]) -> tuple[Callable[[str], None], Callable[[str, BaseException], Any]]:
    """``(stage, fail)`` for a check filling ``record``: ``stage(label)`` marks and reports the stage
    starting (so a timeout can say where it was); ``fail(status, exc)`` records the failure and
    returns the record."""

    def stage(label: str) -> None:
        record.stage = label
        on_stage(record)

    def fail(status: str, exc: BaseException) -> Any:
        record.status = status
        record.error, record.cause = _describe(exc)
        return record

    return stage, fail


def _first_line(text: str) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # torch.onnx colours its messages
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:300] if lines else ""


def _describe(exc: BaseException) -> tuple[str, str | None]:
    """``Type: first line`` of the exception and of its innermost cause, if it wraps one."""
    root, seen = exc, {id(exc)}
    while True:
        inner = root.__cause__ or (None if root.__suppress_context__ else root.__context__)
        if inner is None or id(inner) in seen:
            break
        root = inner
        seen.add(id(root))
    top = f"{type(exc).__name__}: {_first_line(str(exc))}"
    return top, (f"{type(root).__name__}: {_first_line(str(root))}" if root is not exc else None)


def _export(exporter: str, model: Any, args: tuple, kwargs: dict, dynamic_shapes: Any) -> Any:
    import torch

    if exporter == OURS:
        import torch_onnx_fx

        return torch_onnx_fx.export(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, verbose=False)
    return torch.onnx.export(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, dynamo=True, verbose=False)


def max_abs_diff(expected: Any, actual: Sequence[Any]) -> float | None:
    """Max abs difference of the ONNX outputs from the eager outputs, one to one (NaN against NaN
    and equal infinities count as equal); None when the counts or shapes differ."""
    import torch
    from helpers import flat_tensors

    flat_expected = flat_tensors(expected)
    if len(actual) != len(flat_expected):
        return None
    worst = 0.0
    for exp, act in zip(flat_expected, actual):
        if tuple(exp.shape) != tuple(act.shape):
            return None
        if exp.numel() == 0:
            continue
        exp64, act64 = exp.detach().to(torch.float64), act.to(torch.float64)
        diff = torch.where((exp64 == act64) | (exp64.isnan() & act64.isnan()), 0.0, (exp64 - act64).abs())
        worst = max(worst, math.inf if diff.isnan().any() else float(diff.max()))
    return worst


def _as_close_as_eager(case: Any, model: Any, args: tuple, kwargs: dict, eager: Any, actual: Sequence[Any]) -> tuple[bool, str] | None:
    """For cases that allow it (``float64_reference``): whether the ONNX outputs are as close to
    the exact result as eager float32 is, the exact result being eager PyTorch in float64.

    Deep random-weight networks (ResNet-101 segmentation, RegNets) accumulate float32 rounding
    that differs between ATen's and ONNX Runtime's kernels by more than a fixed tolerance allows,
    for both exporters alike; neither result is wrong. ``(passes, why)``, or None when the case
    does not allow it or the float64 model cannot run.
    """
    if not getattr(case, "float64_reference", False):
        return None
    import copy

    import torch
    from helpers import flat_tensors

    def wide(value: Any) -> Any:
        return value.double() if isinstance(value, torch.Tensor) and value.is_floating_point() else value

    try:
        with torch.no_grad():
            exact = flat_tensors(copy.deepcopy(model).double()(*map(wide, args), **{k: wide(v) for k, v in kwargs.items()}))
    except Exception:  # noqa: BLE001 - a model that cannot run in float64 has no reference
        return None
    flat = flat_tensors(eager)
    worst_eager = max(float((e.double() - x).abs().max()) for e, x in zip(flat, exact))
    worst_onnx = max(float((a.double() - x).abs().max()) for a, x in zip(actual, exact))
    why = f"from float64: ONNX {worst_onnx:.1e}, eager float32 {worst_eager:.1e}"
    return worst_onnx <= 2 * worst_eager + case.atol, why


def is_large(model: Any) -> bool:
    """Whether the model's weights may take its ONNX model past protobuf's 2 GB."""
    return sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers())) >= 1 << 30


def check_valid(program: Any, model: Any) -> None:
    """Valid ONNX, not just a graph one runtime accepts: types, shapes and opset of every node.
    A large model (regnet_y_128gf, vit_h_14) is checked from disk, its weights saved beside it,
    as a user would save it."""
    import onnx

    if not is_large(model):
        onnx.checker.check_model(program.model_proto, full_check=True)
        return
    with tempfile.TemporaryDirectory(prefix="modelsweep-check-") as folder:
        path = os.path.join(folder, "model.onnx")
        program.save(path, external_data=True)
        onnx.checker.check_model(path, full_check=True)


def run_case(case: Any, exporter: str, on_stage: Any = lambda record: None) -> Record:
    """Export ``case`` with ``exporter``, run it in ONNX Runtime on both input sets and compare with
    eager; ``on_stage(record)`` is called as each stage starts, so a timeout can say where it was."""
    import torch
    from helpers import assert_close_outputs

    record = Record(case.name, case.family, exporter, case.ci)
    stage, fail = stage_tracking(record, on_stage)

    stage("build")
    try:
        model, args, kwargs, dynamic_shapes = case.build()
        input_sets = [(args, kwargs)] + ([case.second_inputs()] if case.second_inputs is not None else [])
        # Eager outputs first: an export must not be able to change the reference.
        with torch.no_grad():
            expected = [model(*call_args, **call_kwargs) for call_args, call_kwargs in input_sets]
    except Exception as exc:  # noqa: BLE001 - any failure is a result to record
        return fail("build_failed", exc)

    stage("export")
    start = time.perf_counter()
    try:
        program = _export(exporter, model, args, kwargs, dynamic_shapes)
    except Exception as exc:  # noqa: BLE001
        return fail("export_failed", exc)
    finally:
        record.export_s = round(time.perf_counter() - start, 2)

    stage("check")
    try:
        check_valid(program, model)
    except Exception as exc:  # noqa: BLE001
        return fail("invalid_model", exc)

    diffs: list[float | None] = []
    for (call_args, call_kwargs), eager in zip(input_sets, expected):
        stage(f"onnxruntime, input set {record.input_sets + 1}")
        try:
            actual = program(*call_args, **call_kwargs)
        except Exception as exc:  # noqa: BLE001
            return fail("ort_failed", exc)
        record.input_sets += 1
        diffs.append(max_abs_diff(eager, actual))
        record.max_abs_diff = None if None in diffs else max(diffs)  # type: ignore[type-var]
        try:
            assert_close_outputs(eager, actual, case.rtol, case.atol)
        except AssertionError as exc:
            verdict = _as_close_as_eager(case, model, call_args, call_kwargs, eager, actual)
            if verdict is None or not verdict[0]:
                record.status = "mismatch"
                record.error = f"input set {record.input_sets}: {_first_line(str(exc)) or 'output counts differ'}"
                record.note = verdict[1] if verdict else None
                return record
            record.note = verdict[1]
    record.status = "pass"
    stage("done")
    return record


# Imported once by the fork server, so each worker starts warm instead of paying ~10 s of imports,
# and every worker runs the code as it was when the sweep started (translations included).
_PRELOAD = [
    "torch", "transformers", "onnxruntime", "onnxscript", "onnxscript.function_libs.torch_lib.ops",
    "torch.onnx._internal.exporter._core", "torch_onnx_fx", "torch_onnx_fx.ops", "tools.corpus.models", "tools.sweeps.modelsweep",
    "tools.corpus.generated_models", "torchvision", "timm", "diffusers", "tools.corpus.torchvision_models", "tools.corpus.timm_models",
    "tools.corpus.diffusers_models",
]  # the fork server skips those that are not installed here


def _worker(model: str, exporter: str, connection: Any, log_path: str) -> None:
    """Entry of a worker process: sends each stage's record, then the final one."""
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    warnings.simplefilter("ignore")
    record = run_case(find_case(model), exporter, on_stage=lambda r: connection.send(("stage", dataclasses.asdict(r))))
    connection.send(("done", dataclasses.asdict(record)))


def find_case(name: str) -> Any:
    """A case of any corpus by name: generated cases carry their corpus's prefix (``hf-``, ``tv-``...)."""
    from tools.corpus.models import CORPUS, named

    for corpus in GENERATED.values():
        if name.startswith(corpus.prefix):
            return named(importlib.import_module(corpus.module).cases(), name)
    return named(CORPUS, name)


def _run_worker(context: Any, case: Any, exporter: str, timeout_s: float, scratch: Path) -> Record:
    log_path = scratch / f"{case.name}.{exporter}.log"
    return run_in_worker(context, _worker, (case.name, exporter), log_path, timeout_s, Record(case.name, case.family, exporter, case.ci))


def sweep(cases: Sequence[Any], timeout_s: float) -> Iterable[Record]:
    """Every case with each exporter, one worker process at a time."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    with tempfile.TemporaryDirectory(prefix="modelsweep-") as scratch:
        for case in cases:
            for exporter in EXPORTERS:
                yield _run_worker(context, case, exporter, timeout_s, Path(scratch))


# -- results and the page ---------------------------------------------------------------------------


def _run_header(run: int, command: str, timeout_s: float) -> dict[str, Any]:
    """The machine, versions and commit (as every tool records them) when a run starts, with
    transformers' (and torchvision's, where installed) version and the run's settings; ``minutes``
    is filled in when it ends."""
    import transformers

    header = {
        **machine_info(command),
        "kind": "run",
        "run": run,
        "minutes": 0.0,
        "timeout_s": timeout_s,
        "transformers": transformers.__version__,
    }
    for library in ("torchvision", "timm", "diffusers"):
        if importlib.util.find_spec(library) is not None:
            header[library] = importlib.import_module(library).__version__
    return header


def read_results(path: Path) -> tuple[list[dict[str, Any]], list[Record]]:
    """The runs' headers and the records of a results file (none if it does not exist yet)."""
    return read_records(path, Record)


def write_results(path: Path, runs: Sequence[dict[str, Any]], records: Sequence[Record]) -> None:
    write_records(path, runs, records)


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def _diff(value: float | None) -> str:
    if value is None:
        return "–"
    return "0" if value == 0 else f"{value:.1e}"


def _status(record: Record | None) -> str:
    if record is None:
        return "–"
    if record.status == "pass":
        # Passed against eager in float64 (see _as_close_as_eager): the note says how close.
        return f"pass ({record.note})" if record.note else "pass"
    return f"**{record.status}**" + (f" ({record.note})" if record.note else "")


def _pairs(records: Iterable[Record]) -> dict[str, dict[str, Record]]:
    """Each model's records by exporter, in the records' order."""
    pairs: dict[str, dict[str, Record]] = {}
    for record in records:
        pairs.setdefault(record.model, {})[record.exporter] = record
    return pairs


def _run_line(run: dict[str, Any]) -> str:
    packages = [p for p in ("torch", "torchvision", "transformers", "onnxscript", "onnxruntime") if p in run]
    return (
        f"- run {run['run']}: `{run['command']}`, {run['date']}, commit {run['commit']}, "
        f"{run['minutes']:.0f} min on {run['cores']} cores, timeout {run['timeout_s']:.0f} s; "
        + describe_versions(run, packages)
    )


def _per_model_table(pairs: dict[str, dict[str, Record]]) -> list[str]:
    out = [
        f"| model | family | CI | {OURS} | {THEIRS} | max diff, ours | max diff, theirs "
        "| export s, ours | export s, theirs |",
        "|---|---|:-:|---|---|---:|---:|---:|---:|",
    ]
    for model, pair in pairs.items():
        ours, theirs = pair.get(OURS), pair.get(THEIRS)
        first = ours or theirs
        assert first is not None
        seconds = [f"{r.export_s:.1f}" if r is not None and r.export_s is not None else "–" for r in (ours, theirs)]
        out.append(
            f"| {model} | {first.family} | {'✓' if first.ci else ''} | {_status(ours)} | {_status(theirs)} | "
            f"{_diff(ours.max_abs_diff if ours else None)} | {_diff(theirs.max_abs_diff if theirs else None)} | "
            f"{seconds[0]} | {seconds[1]} |"
        )
    return out


def _failures(title: str, records: Sequence[Record]) -> list[str]:
    failures = [r for r in records if r.status != "pass"]
    out = ["", f"{title}: {len(failures)}", ""]
    if not failures:
        return out + ["None."]
    out += ["| model | exporter | status | error | innermost cause |", "|---|---|---|---|---|"]
    return out + [f"| {r.model} | {r.exporter} | {r.status} | {_cell(r.error)} | {_cell(r.cause)} |" for r in failures]


def _torchvision_section(runs: Sequence[dict[str, Any]], records: Sequence[Record]) -> list[str]:
    """The "torchvision models" subsection: how to run them, then the results of ``TORCHVISION_JSON``."""
    out = [
        "",
        "### torchvision models",
        "",
        "The corpus adds eight torchvision classifiers with random weights (`torchvision-resnet18`, "
        "`-mobilenet_v3_small`, `-efficientnet_b0`, `-vit_b_16`, `-convnext_tiny`, `-swin_t`, "
        "`-regnet_y_400mf`, `-densenet121`; 224x224 images, dynamic batch) wherever torchvision is "
        "importable. torchvision 0.29.1 requires torch 2.14.1, so they run from a separate environment "
        f"into their own results, `{TORCHVISION_JSON.relative_to(REPO)}`, which are not counted above; "
        "the main environment then renders this page from both files:",
        "",
        "```bash",
        "python -m venv /tmp/vision",
        "/tmp/vision/bin/pip install torch==2.14.1 torchvision==0.29.1",
        "/tmp/vision/bin/pip install -e '.[test]'",
        "/tmp/vision/bin/python tools/sweeps/modelsweep.py --models " + ",".join(TORCHVISION_MODELS)
        + f" --json {TORCHVISION_JSON.relative_to(REPO)} --out /tmp/vision_coverage.md",
        "python tools/sweeps/modelsweep.py --render-only",
        "```",
        "",
    ]
    if not records:
        return out + ["No results yet."]
    out += ["Runs:", "", *(_run_line(run) for run in runs), "", *_per_model_table(_pairs(records))]
    return out + _failures("#### torchvision failures", records)


def render_section(
    runs: Sequence[dict[str, Any]],
    records: Sequence[Record],
    vision_runs: Sequence[dict[str, Any]] = (),
    vision_records: Sequence[Record] = (),
    corpus: str = "models",
) -> str:
    """The ``## Model corpus`` section, markers included; ``vision_*`` are the torchvision models'
    runs and records, from their own environment. A ``corpus`` named in ``GENERATED`` renders that
    generated corpus instead."""
    pairs = _pairs(records)
    families = collections.Counter(pair[next(iter(pair))].family for pair in pairs.values())
    generated = GENERATED.get(corpus)
    counted = [r for r in records if r.status != "build_failed"]
    rates = {
        e: (sum(r.status == "pass" for r in counted if r.exporter == e), sum(r.exporter == e for r in counted))
        for e in EXPORTERS
    }
    out = [
        START_MARKER,
        f"## {generated.title}" if generated else "## Model corpus",
        "",
        "Generated by `tools/sweeps/modelsweep.py`; do not edit this section by hand. Regenerate it with:",
        "",
        "```bash",
        f"python tools/sweeps/modelsweep.py --corpus {corpus}" if generated else "python tools/sweeps/modelsweep.py",
        "```",
        "",
    ]
    if generated:
        out += [
            generated.intro,
            *(["", generated.environment] if generated.environment else []),
            "",
            "Pass rate over the models that build: "
            + ", ".join(f"{e} {p}/{n} ({100 * p / n:.1f}%)" if n else f"{e} –" for e, (p, n) in rates.items()) + ".",
            "",
            "Runs:",
            "",
        ]
    out += [] if generated else [
        f"Every model of the corpus in `tools/corpus/models.py` ({len(pairs)} models: "
        + ", ".join(f"{n} {family}" for family, n in families.most_common())
        + ") is exported with its dynamic shapes by `torch_onnx_fx.export` and by "
        "`torch.onnx.export(..., dynamo=True)`, each export in its own worker process with a timeout. "
        "Both ONNX models run in ONNX Runtime on the example inputs and on a second input set of other "
        "dynamic sizes, and are compared with eager PyTorch as `tests/models/test_corpus.py` does: dtype, shape, "
        "then `assert_close` with the case's rtol/atol (1e-4/1e-5 unless the case says why not). "
        "transformers models are built from tiny configs with random weights. "
        "Models marked CI are the ones `tests/models/test_corpus.py` runs. The chart is drawn by `tools/pages/plots.py` "
        f"from the same results; redraw it after regenerating this section with `{PLOTS_COMMAND}`.",
        "",
        "Runs:",
        "",
    ]
    out += [_run_line(run) for run in runs]
    counts = {e: collections.Counter(r.status for r in records if r.exporter == e) for e in EXPORTERS}
    out += [
        "", "### Totals", "", *([] if generated else [image("Model status per exporter by model family", MODELSWEEP_FAMILIES_PNG), ""]),
        f"| status | {OURS} | {THEIRS} |", "|---|---:|---:|",
    ]
    for status in STATUSES:
        if counts[OURS][status] or counts[THEIRS][status]:
            out.append(f"| {status} | {counts[OURS][status]} | {counts[THEIRS][status]} |")
    out.append(f"| **total** | **{sum(counts[OURS].values())}** | **{sum(counts[THEIRS].values())}** |")

    def pair_list(title: str, winner: str, loser: str, note: str) -> list[str]:
        rows = [
            pair[loser] for pair in pairs.values()
            if winner in pair and loser in pair and pair[winner].status == "pass" and pair[loser].status != "pass"
        ]
        lines = ["", f"### {title}: {len(rows)}", "", note, ""]
        if not rows:
            return lines + ["None."]
        lines += [f"| model | family | {loser} status | error (innermost cause) |", "|---|---|---|---|"]
        return lines + [f"| {r.model} | {r.family} | {r.status} | {_cell(r.cause or r.error)} |" for r in rows]

    out += pair_list(
        "torch.onnx passes, torch_onnx_fx fails", THEIRS, OURS,
        "Regressions against the exporter torch_onnx_fx replaces. The target is an empty list.",
    )
    out += pair_list(
        "torch.onnx fails, torch_onnx_fx passes", OURS, THEIRS, "Models only torch_onnx_fx exports correctly.",
    )
    out += [
        "",
        "### Per model",
        "",
        "Max diff: the largest absolute difference from eager over both input sets (– where the export "
        "or ONNX Runtime failed, or the outputs' shapes differ). Export: seconds of one export.",
        "",
        *_per_model_table(pairs),
    ]
    out += _failures("### Failures", records)
    if not generated:
        out += _torchvision_section(vision_runs, vision_records)
    out.append(END_MARKER)
    return "\n".join(out)


def write_section(page: Path, section: str) -> None:
    """Replace the text between the markers (included) with ``section``, or append it; the rest of
    the page, which other tools write, is kept byte for byte."""
    text = page.read_text() if page.exists() else ""
    replaced = replace_section(text, START_MARKER, END_MARKER, section)
    if replaced is None:
        replaced = text + ("\n" if text and not text.endswith("\n") else "") + ("\n" if text else "") + section + "\n"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(replaced)


SOURCES_START, SOURCES_END = "<!-- sources:start -->", "<!-- sources:end -->"
DETECTION_JSON = REPO / "tools" / "results" / "detection.jsonl"


def render_sources() -> str:
    """The ``## Models by source`` section of docs/coverage.md: every corpus's results file
    counted per exporter (models that do not build are listed on their pages, not counted)."""
    out = [
        SOURCES_START,
        "## Models by source",
        "",
        "Generated by `tools/sweeps/modelsweep.py` from every corpus's results; each source's page has the "
        "per-model table and the cause of every failure.",
        "",
        f"| source | models | {OURS} pass | {THEIRS} pass | {OURS} failures | {THEIRS} failures | page |",
        "|---|---:|---:|---:|---|---|---|",
    ]
    sources = [("hand-picked corpus", DEFAULT_JSON, "#model-corpus")]
    sources += [(key, corpus.json, corpus.page.name) for key, corpus in GENERATED.items()]
    for source, path, page in sources:
        records = [r for r in read_results(path)[1] if r.status != "build_failed"]
        if not records:
            continue
        cells = [[r for r in records if r.exporter == exporter] for exporter in EXPORTERS]
        models = len({r.model for r in records})
        passes = [sum(r.status == "pass" for r in mine) for mine in cells]
        failures = [
            ", ".join(f"{n} {status}" for status, n in collections.Counter(r.status for r in mine if r.status != "pass").most_common()) or "–"
            for mine in cells
        ]
        out.append(
            f"| {source} | {models} | {passes[0]} ({100 * passes[0] / max(1, len(cells[0])):.0f} %) "
            f"| {passes[1]} ({100 * passes[1] / max(1, len(cells[1])):.0f} %) | {failures[0]} | {failures[1]} | [{page}]({page}) |"
        )
    if DETECTION_JSON.exists():
        detections = [json.loads(line) for line in DETECTION_JSON.read_text().splitlines() if line.strip()]
        statuses = collections.Counter(d.get("status") for d in detections)
        failed = ", ".join(f"{n} {status}" for status, n in statuses.most_common() if status != "pass") or "–"
        out.append(
            f"| torchvision detection (sets of detections) | {len(detections)} | {statuses['pass']} "
            f"({100 * statuses['pass'] / len(detections):.0f} %) | 0 (0 %) | {failed} | {len(detections)} export_failed "
            "(capture) | [coverage_detection.md](coverage_detection.md) |"
        )
    out.append(SOURCES_END)
    return "\n".join(out)


def write_sources(page: Path = DEFAULT_PAGE) -> None:
    text = page.read_text() if page.exists() else ""
    section = render_sources()
    replaced = replace_section(text, SOURCES_START, SOURCES_END, section)
    if replaced is None:
        # First time: before the model corpus section, or at the end.
        marker = text.find(START_MARKER)
        replaced = text[:marker] + section + "\n\n" + text[marker:] if marker >= 0 else text + "\n" + section + "\n"
    page.write_text(replaced)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=("models", *GENERATED), default="models",
                        help="the hand-picked corpus of tools/corpus/models.py, or a generated one")
    parser.add_argument("--models", help="comma-separated corpus names; merged into the existing results")
    parser.add_argument("--sample", type=int, default=1, help="keep every N-th model of the corpus (a quick measurement)")
    parser.add_argument(
        "--offset", type=int, default=0,
        help="with --sample: start at the K-th model, for a sample that does not repeat an earlier one",
    )
    parser.add_argument(
        "--unmeasured", action="store_true",
        help="run only the models with no record in the results yet: completes a full sweep in pieces",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per model and exporter")
    parser.add_argument("--json", type=Path, help="JSON-lines results (default: per corpus, in tools/results)")
    parser.add_argument("--out", type=Path, help="the page whose model section is written (default: per corpus)")
    parser.add_argument("--render-only", action="store_true", help="rewrite the section from --json, run nothing")
    options = parser.parse_args(argv)
    generated = GENERATED.get(options.corpus)
    options.json = options.json or (generated.json if generated else DEFAULT_JSON)
    options.out = options.out or (generated.page if generated else DEFAULT_PAGE)
    def corpus() -> list[Any]:
        # Listed only to run: a generated corpus's library (torchvision, timm) may be missing
        # from the environment that renders its page.
        if generated:
            return importlib.import_module(generated.module).cases()
        from tools.corpus.models import CORPUS

        return CORPUS
    if options.json.resolve() == TORCHVISION_JSON and options.out.resolve() == DEFAULT_PAGE:
        parser.error(
            f"--json {options.json} holds only the torchvision models: write their page elsewhere (--out "
            f"/tmp/vision_coverage.md) and render {DEFAULT_PAGE.relative_to(REPO)} with --render-only"
        )

    runs, records = read_results(options.json)
    if not options.render_only:
        known = {case.name: case for case in corpus()}
        names = options.models.split(",") if options.models else list(known)[options.offset :: max(1, options.sample)]
        if options.unmeasured:
            measured = {record.model for record in records}
            names = [name for name in names if name not in measured]
        unknown = [name for name in names if name not in known]
        if unknown:
            parser.error(f"unknown models {unknown}; known: {list(known)}")
        if not options.models and options.sample <= 1 and options.offset == 0 and not options.unmeasured:
            runs, records = [], []
        run = max((r["run"] for r in runs), default=0) + 1
        command = shlex.join(["python", "tools/sweeps/modelsweep.py", *(sys.argv[1:] if argv is None else argv)])
        header = _run_header(run, command, options.timeout)
        kept = [r for r in records if r.model not in names]
        start = time.monotonic()
        new: list[Record] = []
        for record in sweep([known[name] for name in names], options.timeout):
            record.run = run
            new.append(record)
            detail = f" ({record.error})" if record.error else ""
            elapsed = time.monotonic() - start
            print(f"[{elapsed:5.0f} s] {record.model} {record.exporter}: {record.status}{detail}", flush=True)
            # The run's header goes in with every record: an interrupted sweep keeps a valid file
            # that --unmeasured continues from.
            so_far = {**header, "minutes": round(elapsed / 60, 1)}
            write_results(options.json, [*runs, so_far], kept + new)
        runs = [r for r in runs if any(k.run == r["run"] for k in kept)]
        runs.append({**header, "minutes": round((time.monotonic() - start) / 60, 1)})
        # Corpus order, whatever order the runs came in.
        order = {name: i for i, name in enumerate(known)}
        records = sorted(kept + new, key=lambda r: (order.get(r.model, len(order)), EXPORTERS.index(r.exporter)))
        write_results(options.json, runs, records)
    vision = read_results(TORCHVISION_JSON) if not generated else ([], [])
    write_section(options.out, render_section(runs, records, *vision, corpus=options.corpus))
    if options.out.resolve() in (DEFAULT_PAGE, generated.page if generated else DEFAULT_PAGE):
        write_sources()
    return 0


if __name__ == "__main__":
    # Run as the module tools.sweeps.modelsweep, so the fork server's workers find _worker under that name.
    from tools.sweeps.modelsweep import main as _main

    sys.exit(_main())
