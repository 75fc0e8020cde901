"""transformers' exporters, side by side: its ``OnnxExporter`` against our ``TorchOnnxFxExporter``.

Both backends share transformers' capture (``torch.export`` with its input preparation, cache
pytrees and patches); ``onnx`` converts the program with ``torch.onnx.export`` around its own
patches and FX fixes, ``torch_onnx_fx`` with :func:`torch_onnx_fx.export`
(``torch_onnx_fx/integrations/transformers.py``). Each case of the generated transformers corpus
(``tools/corpus/generated_models.py``) goes through three checks per backend, each in its own
worker process with a timeout:

- ``static`` and ``dynamic``: ``exporter.export(model, inputs, config(dynamic=...))``, run in ONNX
  Runtime through transformers' runner (``exported(**inputs)``), every output tensor compared with
  eager at rtol/atol 1e-4/1e-4; the dynamic export also on the corpus's second input set (other
  batch and sequence length).
- ``generation`` (causal-lm and seq2seq-lm cases): ``exporter.export_for_generation`` from the
  padded input set (prefill and decode components; for an encoder-decoder the encoder too, exported
  alone with ``exporter.export`` since transformers' decomposition leaves it out, and a two-token
  decoder prompt in the sample so the decode's cache axis stays dynamic), then a greedy loop over the
  runners for ten new tokens, compared with eager ``model.generate`` (greedy, no end-of-sequence
  stop) on both input sets.

Statuses: pass, mismatch, export_failed, run_failed, timeout, crashed; build_failed when the corpus
case (or eager generation) itself fails, listed but not counted. A pass records the export time, the
ONNX node count (every component, subgraphs and functions included) and, for the forward checks,
ONNX Runtime's latency (median of ten calls after a warm-up, one thread).

Regenerate::

    python tools/sweeps/transformers_backend.py --tasks causal-lm,seq2seq-lm,base,masked-lm --sample 4

``--cases a,b`` runs those cases and merges their records into the existing results, as does any
run with ``--tasks``, ``--sample`` or ``--unmeasured``; ``--render-only`` rewrites the page from the
results file.
"""

from __future__ import annotations

import argparse
import collections
import copy
import dataclasses
import multiprocessing
import os
import shlex
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO, REPO / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from tools._common import (  # noqa: E402
    describe_machine,
    describe_versions,
    machine_info,
    run_in_worker,
    read_records,
    write_records,
)
from tools.sweeps.modelsweep import _describe, _first_line, max_abs_diff  # noqa: E402

__all__ = ["Record", "BACKENDS", "CHECKS", "STATUSES", "run_check", "sweep", "read_results", "render_page", "main"]

THEIRS = "onnx"
OURS = "torch_onnx_fx"
BACKENDS = (THEIRS, OURS)
CHECKS = ("static", "dynamic", "generation")
GENERATION_TASKS = ("causal-lm", "seq2seq-lm")
STATUSES = ("pass", "mismatch", "export_failed", "run_failed", "timeout", "crashed", "build_failed")
RTOL = ATOL = 1e-4
NEW_TOKENS = 10
LATENCY_CALLS = 10
DEFAULT_JSON = REPO / "tools" / "results" / "transformers_backend.jsonl"
DEFAULT_PAGE = REPO / "docs" / "transformers_backend.md"
COMMAND = "python tools/sweeps/transformers_backend.py"


@dataclasses.dataclass
class Record:
    """One check of one backend on one case. ``error`` is the exception's type and first line,
    ``cause`` its innermost cause's; ``export_s`` and ``nodes`` cover every component of the check;
    ``max_abs_diff`` is over every input set (for generation: the logits of the steps compared)."""

    model: str
    task: str
    backend: str
    check: str
    status: str = "crashed"
    stage: str = "start"
    error: str | None = None
    cause: str | None = None
    export_s: float | None = None
    nodes: int | None = None
    latency_ms: float | None = None
    max_abs_diff: float | None = None
    input_sets: int = 0
    note: str | None = None
    run: int = 0


def task_of(name: str) -> str:
    """``causal-lm`` of ``hf-llama-causal-lm``: the corpus names its cases ``hf-<model_type>-<task>``."""
    from tools.corpus.generated_models import TASKS

    return next(task for task in sorted(TASKS, key=len, reverse=True) if name.endswith(f"-{task}"))


def checks_of(name: str) -> tuple[str, ...]:
    return CHECKS if task_of(name) in GENERATION_TASKS else CHECKS[:2]


# -- one check of one backend, in a worker process ------------------------------------------------


def _exporter(backend: str) -> tuple[Any, Callable[..., Any]]:
    """The backend's exporter and its config class."""
    if backend == OURS:
        from torch_onnx_fx.integrations.transformers import (
            TorchOnnxFxConfig,
            TorchOnnxFxExporter,
        )

        return TorchOnnxFxExporter(), TorchOnnxFxConfig
    from transformers.exporters import OnnxConfig, OnnxExporter

    return OnnxExporter(), OnnxConfig


def _warm_up(backend: str) -> None:
    """One export of a tiny module through the backend's converter, so the timed export does not
    pay for the worker's first use of it (registries, decomposition tables); what the first trace of
    a transformers model costs is still paid, by both backends alike."""
    import torch

    class Tiny(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.softmax(x @ x.T, dim=-1)

    args = (torch.randn(3, 4),)
    if backend == OURS:
        import torch_onnx_fx

        torch_onnx_fx.export(Tiny(), args, verbose=False)
    else:
        torch.onnx.export(Tiny(), args, dynamo=True, verbose=False)


def _one_thread() -> Any:
    """ONNX Runtime session options for one thread: the latency of a tiny model, not of the pool."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return options


def count_nodes(program: Any) -> int:
    """Nodes of an ``onnx_ir.Model``: the graph's, its subgraphs' and its functions'."""
    return sum(1 for _ in program.graph.all_nodes()) + sum(
        sum(1 for _ in function.all_nodes()) for function in program.functions.values()
    )


def _generation_config(model: Any) -> Any:
    """Greedy, no sampling and no end-of-sequence stop, so eager and ONNX make the same number of
    tokens; an encoder-decoder keeps its decoder start token (T5 starts from padding, 0)."""
    from transformers import GenerationConfig

    start = getattr(model.generation_config, "decoder_start_token_id", None)
    if start is None:
        start = getattr(model.config, "decoder_start_token_id", None)
    return GenerationConfig(
        do_sample=False, eos_token_id=None, pad_token_id=0, decoder_start_token_id=start if start is not None else 0,
        max_new_tokens=NEW_TOKENS,
    )


def _latency_ms(call: Callable[[], Any]) -> float:
    call()
    times = []
    for _ in range(LATENCY_CALLS):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return round(1000 * statistics.median(times), 3)


def _cache_of(output: Any) -> Any:
    for name in ("cache", "past_key_values", "cache_params"):
        value = getattr(output, name, None)
        if value is not None:
            return value
    return None


@dataclasses.dataclass
class _Greedy:
    """The eager reference of one generation input set: the kwargs ``generate()`` passed to the
    prefill and first decode forward (captured by transformers' decomposition), its ten new tokens
    and the logits each came from."""

    inputs: dict[str, Any]
    prefill: dict[str, Any]
    decode: dict[str, Any]
    tokens: Any
    logits: list[Any]


def _eager_greedy(model: Any, inputs: dict[str, Any], config: Any) -> _Greedy:
    import torch
    from transformers.exporters.utils import decompose_prefill_decode

    stages = decompose_prefill_decode(model, inputs, generation_config=config)
    with torch.no_grad():
        out = model.generate(
            **copy.deepcopy(inputs), generation_config=config, output_logits=True, return_dict_in_generate=True,
        )
    return _Greedy(inputs, stages["prefill"][1], stages["decode"][1], out.sequences[:, -NEW_TOKENS:], list(out.logits))


_STEP_KEYS = ("attention_mask", "decoder_attention_mask", "position_ids", "cache_position")


def _onnx_greedy(exported: Any, encoder: Any, reference: _Greedy, encoder_decoder: bool) -> tuple[Any, list[Any], list[str]]:
    """Ten greedy tokens through the runners: the prefill on the kwargs ``generate()`` passed it
    (the encoder's output from the ONNX encoder), then a decode step per token whose kwargs are
    derived here as ``generate()`` derives them. Returns the tokens, their logits and notes on
    kwargs whose derivation disagreed with ``generate()``'s first decode step or is unknown.

    The attention mask is always passed: ``generate()`` drops an all-ones mask, but a graph
    exported from a padded batch takes one."""
    import torch

    if set(exported.runners) != {"prefill", "decode"}:
        raise NotImplementedError(
            f"components {list(exported.runners)}: a multimodal decomposition, which this loop (prefill and decode) "
            "does not drive"
        )
    prefill, decode = exported.runners["prefill"], exported.runners["decode"]
    mask = reference.inputs["attention_mask"]
    kwargs = {**copy.deepcopy(reference.prefill), "attention_mask": mask}
    encoder_outputs = None
    if encoder_decoder:
        encoder_outputs = encoder(**{k: reference.inputs[k] for k in ("input_ids", "attention_mask")})
        kwargs["encoder_outputs"] = encoder_outputs
    out = prefill(**kwargs)
    token_key = "decoder_input_ids" if encoder_decoder else "input_ids"
    known = {token_key, "encoder_outputs", "cache", "past_key_values", "cache_params", *_STEP_KEYS}
    notes = [f"{key} kept from generate()'s first decode step" for key, value in reference.decode.items()
             if key not in known and isinstance(value, torch.Tensor)]
    decoder_mask = reference.prefill.get("decoder_attention_mask")
    tokens, logits = [], []
    for step in range(NEW_TOKENS):
        logits.append(out.logits[:, -1].float())
        token = logits[-1].argmax(-1, keepdim=True)
        tokens.append(token)
        if step == NEW_TOKENS - 1:
            break
        step_kwargs = {**reference.decode, token_key: token}
        if not encoder_decoder:  # an encoder-decoder's mask is the encoder's, the same at every step
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=-1)
        step_kwargs["attention_mask"] = mask
        if isinstance(decoder_mask, torch.Tensor):
            decoder_mask = torch.cat([decoder_mask, torch.ones_like(decoder_mask[:, :1])], dim=-1)
            step_kwargs["decoder_attention_mask"] = decoder_mask
        positions = reference.decode.get("position_ids")
        if isinstance(positions, torch.Tensor):
            if positions.dim() == 2 and not encoder_decoder:
                step_kwargs["position_ids"] = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 1)[:, -1:]
            else:
                step_kwargs["position_ids"] = positions + step
        if isinstance(reference.decode.get("cache_position"), torch.Tensor):
            step_kwargs["cache_position"] = reference.decode["cache_position"] + step
        for key in ("cache", "past_key_values", "cache_params"):
            if key in reference.decode:
                step_kwargs[key] = _cache_of(out)
        if encoder_outputs is not None:
            step_kwargs["encoder_outputs"] = encoder_outputs
        if step == 0:
            # The first step's kwargs must be generate()'s: a rule that disagrees would make the
            # comparison meaningless, whatever the backend.
            notes += [
                f"derived {key} differs from generate()'s" for key in _STEP_KEYS
                if isinstance(reference.decode.get(key), torch.Tensor) and not torch.equal(step_kwargs[key], reference.decode[key])
            ]
        out = decode(**step_kwargs)
    return torch.cat(tokens, dim=-1), logits, notes


def _compare_tokens(reference: _Greedy, tokens: Any, logits: list[Any]) -> tuple[bool, float, str | None]:
    """(same tokens, max |Δlogits| over the steps both took from the same prefix, a note at the
    first divergence: eager's top-2 margin there says whether it is a near tie)."""
    import torch

    worst = 0.0
    for step in range(NEW_TOKENS):
        eager = reference.logits[step].float()
        worst = max(worst, float((eager - logits[step]).abs().max()))
        if not torch.equal(reference.tokens[:, step], tokens[:, step]):
            row = int((reference.tokens[:, step] != tokens[:, step]).nonzero()[0])
            top2 = eager[row].topk(2).values
            return False, worst, (
                f"first divergence at new token {step + 1}, row {row}: max |Δlogits| {worst:.1e}, "
                f"eager top-2 margin {float(top2[0] - top2[1]):.1e}"
            )
    return True, worst, None


def run_check(name: str, backend: str, check: str, on_stage: Callable[[Record], None] = lambda record: None) -> Record:
    """One check of ``backend`` on case ``name``; ``on_stage(record)`` is called as each stage
    starts, so a timeout can say where it was."""
    import torch
    from helpers import assert_close_outputs, flat_tensors

    from tools.corpus.generated_models import cases
    from tools.corpus.models import named

    torch.set_num_threads(1)
    case = named(cases(), name)
    record = Record(name, task_of(name), backend, check)

    def stage(label: str) -> None:
        record.stage = label
        on_stage(record)

    def fail(status: str, exc: BaseException) -> Record:
        record.status = status
        record.error, record.cause = _describe(exc)
        return record

    stage("build")
    try:
        model, _, example, _ = case.build()
        input_sets = [example] + ([case.second_inputs()[1]] if case.second_inputs is not None else [])
        encoder_decoder = bool(getattr(model.config, "is_encoder_decoder", False))
        if check == "generation":
            config = _generation_config(model)
            model.generation_config = config
            references = [
                _eager_greedy(model, {k: inputs[k] for k in ("input_ids", "attention_mask")}, config)
                for inputs in input_sets
            ]
        else:
            input_sets = input_sets[:1] if check == "static" else input_sets
            with torch.no_grad():
                expected = [model(**copy.deepcopy(inputs)) for inputs in input_sets]
    except Exception as exc:  # noqa: BLE001 - any failure is a result to record
        return fail("build_failed", exc)

    exporter, config_class = _exporter(backend)
    stage("warm-up")
    _warm_up(backend)
    stage("export")
    start = time.perf_counter()
    try:
        if check == "generation":
            # From the padded input set: generate() drops an all-ones mask, and a graph traced
            # without one ignores the padding of any later batch.
            sample = dict(references[-1].inputs)
            export_sample = dict(sample)
            if encoder_decoder:
                # generate() starts the decoder from one token, so the captured decode's self-attention
                # cache holds one position and torch.export specializes that axis to 1: a decode that
                # runs once. A two-token decoder prompt keeps it dynamic.
                export_sample["decoder_input_ids"] = torch.full(
                    (sample["input_ids"].shape[0], 2), model.generation_config.decoder_start_token_id,
                )
            exported = exporter.export_for_generation(
                model, export_sample, config_class(dynamic=True), generation_config=model.generation_config,
            )
            components = [component.program for component in exported.components.values()]
            encoder = None
            if encoder_decoder:
                encoder = exporter.export(model.get_encoder(), dict(sample), config_class(dynamic=True))
                components.append(encoder.program)
        else:
            exported = exporter.export(model, copy.deepcopy(input_sets[0]), config_class(dynamic=check == "dynamic"))
            components = [exported.program]
    except Exception as exc:  # noqa: BLE001
        return fail("export_failed", exc)
    finally:
        record.export_s = round(time.perf_counter() - start, 2)
    record.nodes = sum(count_nodes(program) for program in components)

    stage("onnxruntime session")
    try:
        exported.to("cpu", session_options=_one_thread())
        if check == "generation" and encoder is not None:
            encoder.to("cpu", session_options=_one_thread())
    except Exception as exc:  # noqa: BLE001
        return fail("run_failed", exc)

    diffs: list[float] = []
    notes: list[str] = []
    for index in range(len(references if check == "generation" else input_sets)):
        stage(f"onnxruntime, input set {index + 1}")
        try:
            if check == "generation":
                tokens, logits, derivation = _onnx_greedy(exported, encoder, references[index], encoder_decoder)
            else:
                actual = flat_tensors(exported(**copy.deepcopy(input_sets[index])))
        except Exception as exc:  # noqa: BLE001
            return fail("run_failed", exc)
        record.input_sets += 1
        if check == "generation":
            notes += [f"input set {index + 1}: {note}" for note in derivation]
            same, worst, why = _compare_tokens(references[index], tokens, logits)
            diffs.append(worst)
            record.max_abs_diff = max(diffs)
            if not same:
                record.status, record.error = "mismatch", f"input set {index + 1}: {why}"
                record.note = "; ".join(notes) or None
                return record
            continue
        diff = max_abs_diff(expected[index], actual)
        diffs.append(float("inf") if diff is None else diff)
        record.max_abs_diff = max(diffs)
        try:
            assert_close_outputs(expected[index], actual, RTOL, ATOL)
        except AssertionError as exc:
            record.status = "mismatch"
            record.error = f"input set {index + 1}: {_first_line(str(exc)) or 'output counts differ'}"
            return record
    record.note = "; ".join(notes) or None
    if check != "generation":
        stage("latency")
        try:
            record.latency_ms = _latency_ms(lambda: exported(**input_sets[0]))
        except Exception as exc:  # noqa: BLE001
            return fail("run_failed", exc)
    record.status = "pass"
    stage("done")
    return record


# Imported once by the fork server, so each worker starts warm instead of paying ~10 s of imports.
_PRELOAD = [
    "torch", "transformers", "transformers.exporters", "onnxruntime", "onnxscript",
    "onnxscript.function_libs.torch_lib.ops", "torch.onnx._internal.exporter._core", "torch_onnx_fx",
    "torch_onnx_fx.ops", "torch_onnx_fx.integrations.transformers", "tools.corpus.models",
    "tools.corpus.generated_models", "tools.sweeps.transformers_backend",
]


def _worker(name: str, backend: str, check: str, connection: Any, log_path: str) -> None:
    """Entry of a worker process: sends each stage's record, then the final one."""
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    warnings.simplefilter("ignore")
    record = run_check(name, backend, check, on_stage=lambda r: connection.send(("stage", dataclasses.asdict(r))))
    connection.send(("done", dataclasses.asdict(record)))


def _run_worker(context: Any, name: str, backend: str, check: str, timeout_s: float, scratch: Path) -> Record:
    log_path = scratch / f"{name}.{backend}.{check}.log"
    return run_in_worker(context, _worker, (name, backend, check), log_path, timeout_s, Record(name, task_of(name), backend, check))


def sweep(names: Sequence[str], timeout_s: float) -> Iterable[Record]:
    """Every check of every case with each backend, one worker process at a time. A case that
    does not build is built once, not once per check and backend."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    with tempfile.TemporaryDirectory(prefix="transformers-backend-") as scratch:
        for name in names:
            broken: Record | None = None
            for check in checks_of(name):
                for backend in BACKENDS:
                    if broken is not None:
                        yield dataclasses.replace(broken, backend=backend, check=check)
                        continue
                    record = _run_worker(context, name, backend, check, timeout_s, Path(scratch))
                    if record.status == "build_failed" and check != "generation":
                        broken = record
                    yield record


# -- results and the page -------------------------------------------------------------------------


def read_results(path: Path) -> tuple[list[dict[str, Any]], list[Record]]:
    """The runs' headers and the records of a results file (none if it does not exist yet)."""
    return read_records(path, Record)


def write_results(path: Path, runs: Sequence[dict[str, Any]], records: Sequence[Record]) -> None:
    write_records(path, runs, records)


def _shown(path: Path) -> str:
    """``path`` relative to the repository when it is inside it."""
    path = path.resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def _cell(text: str | None) -> str:
    """``text`` for a table cell: a truncated message may leave a backtick unpaired, which would
    swallow the row's other cells, and ``2*u4 ... 2*u4`` would be emphasis."""
    text = (text or "").replace("\n", " ").replace("`", "'").replace("*", "\\*").replace("<", "&lt;")
    return text.replace("|", "\\|")


def _status(record: Record | None) -> str:
    if record is None:
        return "–"
    return "pass" if record.status == "pass" else f"**{record.status}**"


def _ratio(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} (n={len(values)})" if values else "–"


def render_page(runs: Sequence[dict[str, Any]], records: Sequence[Record], results: Path = DEFAULT_JSON) -> str:
    """The whole page: how it was measured, the runs, the summary, the cases one backend alone
    passes, every case and every failure."""
    pairs: dict[tuple[str, str], dict[str, Record]] = {}
    for record in records:
        pairs.setdefault((record.model, record.check), {})[record.backend] = record
    counted = [r for r in records if r.status != "build_failed"]
    out = [
        "# transformers' exporters: OnnxExporter and TorchOnnxFxExporter",
        "",
        f"Generated by `tools/sweeps/transformers_backend.py` from `{_shown(results)}`; "
        "do not edit by hand. Regenerate it with the runs' commands, in order:",
        "",
        "```bash",
        *(run["command"] for run in runs),
        "```",
        "",
        f"and redraw this page from the results alone with `{COMMAND} --render-only`.",
        "",
        "transformers' `OnnxExporter` (backend `onnx`: `torch.export` with transformers' patches, then "
        "`torch.onnx.export`) and this project's `TorchOnnxFxExporter` (backend `torch_onnx_fx`: the same "
        "capture, converted by `torch_onnx_fx.export`; see [transformers' exporters](transformers.md)) on the "
        "cases of the generated transformers corpus (`tools/corpus/generated_models.py`: small configs, random "
        "weights). Each check runs in its own worker process:",
        "",
        "- **static** and **dynamic**: `exporter.export(model, inputs, config(dynamic=False|True))`, run in ONNX "
        "Runtime through transformers' runner (`exported(**inputs)`), every output tensor compared with eager "
        f"at rtol/atol {RTOL:.0e}/{ATOL:.0e}; the dynamic export also on a second input set of another batch and "
        "sequence length (left-padded for causal LMs).",
        "- **generation** (causal-lm and seq2seq-lm cases): `exporter.export_for_generation(model, "
        "{input_ids, attention_mask}, config(dynamic=True))`, then a greedy loop over the `prefill` and "
        f"`decode` runners for {NEW_TOKENS} new tokens, compared token for token with eager `model.generate` "
        "(greedy, no end-of-sequence stop) on both input sets. The sample is the padded input set: "
        "`generate()` drops an all-ones attention mask, and graphs traced without one take no mask and "
        "ignore the padding of any later batch. transformers' decomposition leaves an encoder-decoder's "
        "encoder out (the prefill takes `encoder_outputs`), so the encoder is exported alone with "
        "`exporter.export(model.get_encoder(), ...)` and counted in that check's time and nodes; and as "
        "`generate()` starts the decoder from one token, the captured decode's self-attention cache holds "
        "one position, which `torch.export` specializes to 1 (a decode that runs once): the sample "
        "carries a two-token decoder prompt so that axis stays dynamic. The first decode step's kwargs "
        "derived by the loop are checked against those `generate()` passed. A mismatch names the first "
        "diverging token and eager's top-2 logit margin there: a margin near 0 is a near tie, not a wrong "
        "graph.",
        "",
        "Statuses: pass, mismatch, export_failed, run_failed (ONNX Runtime or the runner), timeout, crashed; "
        "build_failed when the case itself (or eager generation) fails: listed, not counted. Export time "
        "is measured after a warm-up export of a tiny module through the same converter in the worker, and "
        "covers every component of a check (for generation: two `generate` calls transformers makes to "
        "capture the stages, the prefill and decode exports, and an encoder-decoder's encoder). Nodes: every "
        "component's, subgraphs and local functions included. Latency: median of "
        f"{LATENCY_CALLS} calls of `exported(**inputs)` after a warm-up, ONNX Runtime on one thread, the "
        "runner's IO binding and output rebuilding included.",
        "",
        "Runs:",
        "",
    ]
    for run in runs:
        out.append(
            f"- run {run['run']}: `{run['command']}`, {run['date']}, commit {run['commit']}, {run['minutes']:.0f} min, "
            f"{describe_machine(run)}, timeout {run['timeout_s']:.0f} s; "
            + describe_versions(run, ("torch", "transformers", "onnxscript", "onnxruntime"))
        )
    cases_run = {r.model for r in records}
    built = {r.model for r in counted}
    out += [
        "",
        "## Summary",
        "",
        f"{len(cases_run)} cases ({', '.join(f'{n} {t}' for t, n in collections.Counter(task_of(c) for c in sorted(cases_run)).most_common())}); "
        f"{len(cases_run) - len(built)} of them do not build.",
        "",
        f"| check | cases | {THEIRS} pass | {OURS} pass | {THEIRS} failures | {OURS} failures |",
        "|---|---:|---:|---:|---|---|",
    ]
    for check in CHECKS:
        mine = [r for r in counted if r.check == check]
        if not mine:
            continue
        n = len({r.model for r in mine})
        cells = []
        for backend in BACKENDS:
            statuses = collections.Counter(r.status for r in mine if r.backend == backend)
            cells.append((statuses["pass"], ", ".join(f"{c} {s}" for s, c in statuses.most_common() if s != "pass") or "–"))
        out.append(f"| {check} | {n} | {cells[0][0]} | {cells[1][0]} | {cells[0][1]} | {cells[1][1]} |")

    ratios: dict[str, dict[str, list[float]]] = {check: collections.defaultdict(list) for check in CHECKS}
    for (model, check), pair in pairs.items():
        theirs, ours = pair.get(THEIRS), pair.get(OURS)
        if not (theirs and ours and theirs.status == ours.status == "pass"):
            continue
        for field in ("export_s", "nodes", "latency_ms"):
            a, b = getattr(theirs, field), getattr(ours, field)
            if a and b is not None:
                ratios[check][field].append(b / a)
    out += [
        "",
        f"Median ratio {OURS} / {THEIRS} over the cases both pass (below 1: ours is faster or smaller):",
        "",
        "| check | export time | ONNX nodes | ONNX Runtime latency |",
        "|---|---:|---:|---:|",
    ]
    for check in CHECKS:
        if ratios[check]:
            r = ratios[check]
            out.append(f"| {check} | {_ratio(r['export_s'])} | {_ratio(r['nodes'])} | {_ratio(r['latency_ms'])} |")

    def only(winner: str, loser: str) -> list[str]:
        rows = [
            pair[loser] for pair in pairs.values()
            if winner in pair and loser in pair and pair[winner].status == "pass"
            and pair[loser].status not in ("pass", "build_failed")
        ]
        lines = ["", f"## {winner} passes, {loser} does not: {len(rows)}", ""]
        if not rows:
            return lines + ["None."]
        lines += [f"| case | check | {loser} status | stage | error | innermost cause |", "|---|---|---|---|---|---|"]
        return lines + [
            f"| {r.model} | {r.check} | {r.status} | {r.stage} | {_cell(r.error)} | {_cell(r.cause)} |" for r in rows
        ]

    out += only(THEIRS, OURS)
    out += only(OURS, THEIRS)
    out += [
        "",
        "## Per case",
        "",
        "Export s, nodes and latency ms are shown as theirs / ours, for the backends that pass.",
        "",
        f"| case | check | {THEIRS} | {OURS} | export s | nodes | latency ms | max diff, theirs / ours |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]

    def both(pair: dict[str, Record], field: str, digits: int) -> str:
        values = []
        for backend in BACKENDS:
            r = pair.get(backend)
            value = getattr(r, field) if r is not None and r.status == "pass" else None
            values.append("–" if value is None else (str(value) if isinstance(value, int) else f"{value:.{digits}f}"))
        return " / ".join(values)

    def diff(pair: dict[str, Record]) -> str:
        cells = []
        for backend in BACKENDS:
            value = pair[backend].max_abs_diff if backend in pair else None
            cells.append("–" if value is None else ("0" if value == 0 else f"{value:.1e}"))
        return " / ".join(cells)

    for (model, check), pair in pairs.items():
        out.append(
            f"| {model} | {check} | {_status(pair.get(THEIRS))} | {_status(pair.get(OURS))} | {both(pair, 'export_s', 1)} "
            f"| {both(pair, 'nodes', 0)} | {both(pair, 'latency_ms', 2)} | {diff(pair)} |"
        )
    failures = [r for r in records if r.status != "pass"]
    out += ["", f"## Failures: {len(failures)}", ""]
    if failures:
        out += ["| case | check | backend | status | stage | error | innermost cause | note |", "|---|---|---|---|---|---|---|---|"]
        out += [
            f"| {r.model} | {r.check} | {r.backend} | {r.status} | {r.stage} | {_cell(r.error)} | {_cell(r.cause)} | {_cell(r.note)} |"
            for r in failures
        ]
    else:
        out.append("None.")
    notes = [r for r in records if r.status == "pass" and r.note]
    if notes:
        out += ["", "## Notes on passing checks", "", "| case | check | backend | note |", "|---|---|---|---|"]
        out += [f"| {r.model} | {r.check} | {r.backend} | {_cell(r.note)} |" for r in notes]
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    from tools.corpus.generated_models import TASKS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", help="comma-separated case names (hf-llama-causal-lm,...); merged into the results")
    parser.add_argument(
        "--tasks", help=f"comma-separated tasks, in the order to run them (of {', '.join(TASKS)}; default: all)",
    )
    parser.add_argument("--sample", type=int, default=1, help="keep every N-th case of each task (a quick measurement)")
    parser.add_argument("--offset", type=int, default=0, help="with --sample: start at each task's K-th case")
    parser.add_argument("--unmeasured", action="store_true", help="run only the cases with no record yet")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per case, backend and check")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="JSON-lines results")
    parser.add_argument("--out", type=Path, default=DEFAULT_PAGE, help="the Markdown page")
    parser.add_argument("--render-only", action="store_true", help="rewrite the page from --json, run nothing")
    options = parser.parse_args(argv)

    runs, records = read_results(options.json)
    if not options.render_only:
        from tools.corpus.generated_models import cases

        known = [case.name for case in cases()]
        if options.cases:
            names = options.cases.split(",")
            unknown = [name for name in names if name not in known]
            if unknown:
                parser.error(f"unknown cases {unknown}")
        else:
            tasks = options.tasks.split(",") if options.tasks else list(TASKS)
            unknown = [task for task in tasks if task not in TASKS]
            if unknown:
                parser.error(f"unknown tasks {unknown}; known: {list(TASKS)}")
            names = [
                name for task in tasks
                for name in [n for n in known if task_of(n) == task][options.offset :: max(1, options.sample)]
            ]
        if options.unmeasured:
            measured = {record.model for record in records}
            names = [name for name in names if name not in measured]
        if not (options.cases or options.tasks or options.sample > 1 or options.offset or options.unmeasured):
            runs, records = [], []
        run = max((r["run"] for r in runs), default=0) + 1
        command = shlex.join(["python", "tools/sweeps/transformers_backend.py", *(sys.argv[1:] if argv is None else argv)])
        import transformers

        header = {**machine_info(command), "kind": "run", "run": run, "minutes": 0.0, "timeout_s": options.timeout,
                  "transformers": transformers.__version__}
        kept = [r for r in records if r.model not in names]
        start = time.monotonic()
        new: list[Record] = []
        for record in sweep(names, options.timeout):
            record.run = run
            new.append(record)
            detail = f" ({record.error})" if record.error else ""
            elapsed = time.monotonic() - start
            print(f"[{elapsed:5.0f} s] {record.model} {record.check} {record.backend}: {record.status}{detail}", flush=True)
            # The header goes in with every record: an interrupted sweep keeps a valid file.
            write_results(options.json, [*runs, {**header, "minutes": round(elapsed / 60, 1)}], kept + new)
        runs = [r for r in runs if any(k.run == r["run"] for k in kept)]
        runs.append({**header, "minutes": round((time.monotonic() - start) / 60, 1)})
        order = {name: i for i, name in enumerate(known)}
        records = sorted(
            kept + new, key=lambda r: (order.get(r.model, len(order)), CHECKS.index(r.check), BACKENDS.index(r.backend)),
        )
        write_results(options.json, runs, records)
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(render_page(runs, records, options.json))
    return 0


if __name__ == "__main__":
    # Run as the module tools.sweeps.transformers_backend, so the fork server's workers find _worker under that name.
    from tools.sweeps.transformers_backend import main as _main

    sys.exit(_main())
