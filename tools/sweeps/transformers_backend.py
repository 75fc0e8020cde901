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
    machine_info,
    run_in_worker,
)
from tools.sweeps.modelsweep import _first_line, max_abs_diff, stage_tracking  # noqa: E402

from tools.sweeps.transformers_backend_results import (  # noqa: E402
    ATOL, BACKENDS, CHECKS, DEFAULT_JSON, DEFAULT_PAGE, LATENCY_CALLS, NEW_TOKENS, OURS, RTOL,
    STATUSES, Record, checks_of, read_results, render_page, task_of, write_results,
)

__all__ = ["Record", "BACKENDS", "CHECKS", "STATUSES", "run_check", "sweep", "read_results", "render_page", "main"]


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
    stage, fail = stage_tracking(record, on_stage)

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
