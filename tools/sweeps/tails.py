"""Elementwise functions over their whole range, in units in the last place, side by side with eager.

The operator sweep compares OpInfo's samples (moderate values) with an absolute-plus-relative
tolerance, and the differential fuzzer adds extreme inputs under the same tolerance. Neither sees
a function that is right to 1e-8 absolutely and wrong relatively where its result is tiny:
``sigmoid(-20)`` computed as 0, ``erfc(4)`` as 0, ``log(erfc(x))`` then ``-inf``. This sweep
exports each unary elementwise OpInfo op once per floating dtype, runs it in ONNX Runtime on a
grid that spans the dtype's range (both signs, every decade from the smallest subnormal to the
largest finite value, dense around -50..50, integers, the op's domain edges, zeros, infinities,
NaN) and measures every result in units in the last place (ulps) of the dtype against the op
computed by eager PyTorch in float64 (for float64 itself: by mpmath at 40 digits where it has the
function, else eager's float64). A point is **flagged** when the export is off by more than
``--ulps`` and by more than ``--factor`` times eager's own error there, or when it gives a
different special value (NaN, an infinity, a finite number) than eager does.

    python tools/sweeps/tails.py                                   # every op and floating dtype
    python tools/sweeps/tails.py --ops erfc,sigmoid --dtypes float32 --exporters torch_onnx_fx
    python tools/sweeps/tails.py --render-only                     # the page again from the results (NOTES changed)

Results: ``tools/results/tails.jsonl``; page: ``docs/tails.md``. ``tests/tooling/test_tails.py``
checks the measure (ulps, special values, the flagging rule) and one op end to end.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO, REPO / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import torch  # noqa: E402
import torch.utils._pytree as pytree  # noqa: E402

from tools._common import describe_machine, machine_info  # noqa: E402
from tools.sweeps.opsweep import OURS, THEIRS, OpCall, _as_double, _export, _ort_session, describe_exception, op_infos, op_key, skip_reason  # noqa: E402

RESULTS = REPO / "tools" / "results" / "tails.jsonl"
PAGE = REPO / "docs" / "tails.md"
FLOATING = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16}
# Elementwise ops OpInfo does not list among its unary ufuncs.
EXTRA_OPS = ("nn.functional.gelu", "nn.functional.hardswish", "nn.functional.leaky_relu")
# Unary ufuncs that are no function of a value's magnitude: conversions, fills, views of parts.
_LEFT_OUT = {
    "bfloat16", "bool", "byte", "cdouble", "cfloat", "chalf", "char", "double", "float", "half", "int",
    "long", "short", "fill", "jiterator_unary", "conj", "conj_physical", "imag", "real", "positive",
}


# What a flag means where it was looked into: the page shows it beside the op's row.
NOTES = {
    "nn.functional.elu": "ONNX Runtime's `Elu` computes exp(x) - 1 (absolute error 6e-8, as torch.onnx). An expm1 form was measured 1.6-2.4x slower on a 4-convolution ELU network (8x on the activation alone), so the ONNX operator stays; float64 uses expm1",
    "nn.functional.selu": "as elu",
    "nn.functional.celu": "as elu",
    "nn.functional.hardsigmoid": "ONNX's `HardSigmoid` computes x / 6 + 1/2, which rounds next to -3 (absolute 2e-8), as torch.onnx",
    "tanh": "ONNX Runtime's `Tanh` flushes subnormal arguments to zero (as torch.onnx)",
    "nn.functional.tanhshrink": "x - tanh(x) cancels near 0 in eager too; ours is the closer of the two to float64 on most flagged points",
    "igammac": "eager's float64 (the reference) is itself off for tiny a: Q(1e-30, 1) is 1e-30 E1(1) = 2.19e-31 (mpmath), ours; eager gives 7.97e-31",
    "igamma": "as igammac, for P = 1 - Q where it is computed as Q; float64 P(5e-324, 5e-324) is 1 (x^a), eager gives 0",
    "lgamma": "float64: next to its negative roots (-2.457, -2.747...) the reflection cancels, up to 500 ulps of values near 0.004 (1e-13 relatively)",
    "mvlgamma.mvlgamma_p_1": "as lgamma",
    "mvlgamma.mvlgamma_p_3": "as lgamma",
    "mvlgamma.mvlgamma_p_5": "as lgamma",
    "digamma": "float64: next to its root at -0.504 the reflection cancels (47 ulps; eager 4)",
    "special.airy_ai": "eager's float64 (the reference for float32) is itself off: 7e-5 relatively at -2.35 (everywhere between -2.6 and -2.09; mpmath agrees with ours) and 0 beyond 25.77, where ours is the value",
    "special.bessel_j0": "float64: next to the zeros, relative errors of absolutely small values (eager's own reach 5e5 ulps)",
    "special.bessel_j1": "as bessel_j0",
    "special.bessel_y0": "as bessel_j0",
    "special.bessel_y1": "as bessel_j0",
    "special.modified_bessel_k0": "float64, at the smallest subnormal: eager's log(x / 2) is -inf, so eager gives inf (K1: NaN); ours is the true value (K1: inf, its 1/x overflowing)",
    "special.modified_bessel_k1": "as modified_bessel_k0",
    "special.scaled_modified_bessel_k0": "as modified_bessel_k0",
    "special.scaled_modified_bessel_k1": "as modified_bessel_k0",
    "nn.functional.hardswish": "as hardsigmoid next to -3; float64 beyond 3e307 eager's x (x + 3) overflows, ours is the value",
    "nn.functional.mish": "one point, a subnormal result (-3.5e-37 at -88.4): ONNX Runtime's Softplus/Tanh there, as torch.onnx",
    "round.decimals_neg_3": "two points past 4e8: round(x / 1000) * 1000 as torchlib spells it, as torch.onnx",
    "polygamma.polygamma_n_0": "float64 against eager (no mpmath mapping): at and next to the poles eager's trigamma returns rounding noise (4e31 at -4), ours inf",
    "polygamma.polygamma_n_1": "as polygamma_n_0",
    "polygamma.polygamma_n_2": "as polygamma_n_0",
    "polygamma.polygamma_n_3": "as polygamma_n_0",
    "polygamma.polygamma_n_4": "as polygamma_n_0",
    "special.polygamma.special_polygamma_n_0": "as polygamma_n_0",
    "special.zeta": "q = -1,598,952.5 (37 pairs): a negative q needs -q direct terms, which the translation's Loop caps at 2^20 steps; past the cap the result is NaN, where eager sums them all",
    "fmod": "float64, by a subnormal divisor: eager gives NaN (its quotient overflows), the remainder is 0 (ours)",
    "remainder": "as fmod",
}


def tail_ops() -> list[str]:
    """Every unary elementwise OpInfo op worth measuring, in op_db's order."""
    from torch.testing._internal.common_methods_invocations import unary_ufuncs

    names = [op_key(info) for info in unary_ufuncs if not info.name.startswith("_refs.")]
    return [name for name in dict.fromkeys(names) if name.split(".")[0] not in _LEFT_OUT] + list(EXTRA_OPS)


def grid(dtype: torch.dtype, edges: Sequence[float] = (), per_decade: int = 10) -> torch.Tensor:
    """Distinct values of ``dtype`` spanning its whole range, sorted, NaN last."""
    info = torch.finfo(dtype)
    smallest = info.smallest_normal * info.eps  # the smallest subnormal
    exponents = torch.arange(math.log10(smallest), math.log10(info.max), 1.0 / per_decade, dtype=torch.float64)
    magnitudes = torch.pow(10.0, exponents)
    near = [torch.linspace(-50, 50, 2001, dtype=torch.float64), torch.arange(-20, 21, dtype=torch.float64)]
    for edge in (*edges, -3.0, 3.0, 1.0, 2.0):  # and the kinks of hard* activations, the roots of lgamma
        for toward in (math.inf, -math.inf):  # the 8 neighbours on each side
            value, limit = torch.tensor(edge, dtype=dtype), torch.tensor(toward, dtype=dtype)
            for _ in range(8):
                value = torch.nextafter(value, limit)
                near.append(value.to(torch.float64).reshape(1))
    values = torch.cat([magnitudes, -magnitudes, *near, torch.tensor([0.0, math.inf, -math.inf, smallest, info.max, -info.max], dtype=torch.float64)])
    distinct = torch.unique(values.to(dtype).to(torch.float64))
    return torch.cat([torch.tensor([-0.0], dtype=torch.float64), distinct, torch.tensor([math.nan], dtype=torch.float64)]).to(dtype)


def binary_ops() -> list[str]:
    """Every binary elementwise OpInfo op of two floating tensors worth measuring."""
    from torch.testing._internal.common_methods_invocations import binary_ufuncs

    # Integer and bool ops, comparisons, complex results, and polynomials (their second argument
    # is a degree: eager's recurrence would run 1e38 steps).
    prefixes = ("__r", "bitwise", "logical", "jiterator")
    left_out = {"complex", "polar", "gcd", "lcm", "eq", "ne", "lt", "le", "gt", "ge", "isclose"}
    names = dict.fromkeys(op_key(info) for info in binary_ufuncs if not info.name.startswith("_refs."))
    return [name for name in names if name not in left_out and not name.startswith(prefixes) and "polynomial" not in name]


def pair_grid(dtype: torch.dtype, per_sign: int = 70) -> tuple[torch.Tensor, torch.Tensor]:
    """Every pair of about 2 * per_sign + 20 values spanning ``dtype``'s range (a decade step
    that fits ``per_sign`` magnitudes, small numbers and special values), as two flat tensors."""
    info = torch.finfo(dtype)
    low, high = math.log10(info.smallest_normal * info.eps), math.log10(info.max)
    magnitudes = torch.pow(10.0, torch.linspace(low, high, per_sign, dtype=torch.float64))
    special = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 0.1, 7.5, -7.5, 1e-3, 100.0, -100.0]
    values = torch.cat([magnitudes, -magnitudes, torch.tensor(special, dtype=torch.float64)]).to(dtype)
    a, b = torch.meshgrid(values, values, indexing="ij")
    return a.flatten(), b.flatten()


def ulps(values: torch.Tensor, reference: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """|values - reference| in ulps of ``dtype`` at the float64 ``reference`` (finite points)."""
    info = torch.finfo(dtype)
    mantissa_bits = {torch.float64: 53, torch.float32: 24, torch.float16: 11, torch.bfloat16: 8}[dtype]
    _, exponent = torch.frexp(reference)
    lowest = round(math.log2(info.smallest_normal)) + 1  # below it, the spacing is the subnormals'
    exponent = torch.where(reference == 0, lowest, exponent.clamp(min=lowest))
    spacing = torch.ldexp(torch.ones_like(reference), exponent - mantissa_bits)
    return ((values.to(torch.float64) - reference).abs() / spacing).nan_to_num(nan=math.inf)


def special(values: torch.Tensor) -> torch.Tensor:
    """0 for a finite value, 1 for NaN, 2 for +inf, 3 for -inf."""
    kind = torch.zeros(values.shape, dtype=torch.int8)
    kind[values.isnan()] = 1
    kind[values == math.inf] = 2
    kind[values == -math.inf] = 3
    return kind


@dataclasses.dataclass
class Measure:
    """How far one output is from the float64 reference, and where it is flagged."""

    max_ulps: float  # over the points where the true result, eager's and the export's are finite
    flagged: int
    worst: dict[str, Any] | None  # the flagged point that is furthest off, or the largest error


def measure(inputs: torch.Tensor, got: torch.Tensor, eager: torch.Tensor, reference: torch.Tensor, *, max_ulps: float, factor: float) -> tuple[Measure, Measure]:
    """The export's and eager's errors; the export's flagged points (eager is never flagged).
    ``inputs`` holds each point's argument, or a row of arguments per point."""
    dtype = eager.dtype
    if not dtype.is_floating_point:
        differs = (got != eager) & ~(got.isnan() if got.is_floating_point() else torch.zeros_like(got, dtype=torch.bool))
        worst = None
        if differs.any():
            i = int(differs.nonzero()[0])
            worst = {"x": inputs[i].tolist(), "got": float(got[i]), "eager": float(eager[i])}
        return Measure(0.0, int(differs.sum()), worst), Measure(0.0, 0, None)
    reference = reference.to(torch.float64)
    # The true result's kind is float64's rounded to the dtype: exp(89) is inf in float32. A
    # result of eager's kind or of the true kind is no mismatch (eager's x * 6 overflows in
    # hardswish(1e38), the true value does not).
    truth = special(reference.to(dtype))
    finite = truth == 0
    eager_error = torch.where(special(eager) == 0, ulps(eager, reference, dtype), torch.full_like(reference, math.inf))
    eager_error = torch.where(finite, eager_error, torch.zeros_like(reference))
    got_error = torch.where(finite, ulps(got, reference, dtype), torch.zeros_like(reference))
    kind = special(got)
    wrong_kind = (kind != special(eager)) & (kind != truth)
    flags = wrong_kind | (finite & (got_error > max_ulps) & (got_error > factor * eager_error))
    score = torch.where(wrong_kind, torch.full_like(got_error, math.inf), got_error)
    i = int(torch.argmax(torch.where(flags, score, torch.full_like(score, -1.0))) if flags.any() else torch.argmax(got_error))

    def point(j: int) -> dict[str, Any]:
        return {"x": inputs[j].tolist(), "got": float(got[j]), "eager": float(eager[j]), "float64": float(reference[j]),
                "ulps": float(got_error[j]), "eager_ulps": float(eager_error[j])}

    agreed = finite & (special(eager) == 0) & (kind == 0)  # the largest errors: where both are finite
    ours = Measure(float(got_error[agreed].max()) if agreed.any() else 0.0, int(flags.sum()), point(i))
    theirs = Measure(float(eager_error[agreed].max()) if agreed.any() else 0.0, 0, None)
    return ours, theirs


# float64 has no wider dtype to check it against: these ops' float64 reference is mpmath at 40
# digits (eager's own float64 is off by up to 1e-6 in places: Bessel J and Y, Airy, trigamma).
# Other float64 ops are compared with eager itself, whose error is then 0 by definition.
def _mpmath_functions() -> dict[str, Callable[[Any], Any]]:
    import mpmath

    mp = mpmath.mp

    def lgamma(x: Any) -> Any:
        return mp.inf if x <= 0 and x == mp.floor(x) else mp.log(abs(mp.gamma(x)))

    def scaled(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
        return lambda x: f(x) * mp.exp(-abs(x))

    return {
        "sin": mp.sin, "cos": mp.cos, "tan": mp.tan, "asin": mp.asin, "acos": mp.acos, "atan": mp.atan,
        "sinh": mp.sinh, "cosh": mp.cosh, "tanh": mp.tanh, "asinh": mp.asinh, "acosh": mp.acosh, "atanh": mp.atanh,
        "exp": mp.exp, "exp2": lambda x: mp.power(2, x), "expm1": mp.expm1, "log": mp.log, "log2": lambda x: mp.log(x, 2),
        "log10": mp.log10, "log1p": mp.log1p, "sqrt": mp.sqrt, "rsqrt": lambda x: 1 / mp.sqrt(x),
        "sigmoid": lambda x: 1 / (1 + mp.exp(-x)), "nn.functional.silu": lambda x: x / (1 + mp.exp(-x)),
        "nn.functional.logsigmoid": lambda x: -mp.log1p(mp.exp(-x)), "sinc": lambda x: mp.sinc(mp.pi * x),
        "erf": mp.erf, "erfc": mp.erfc, "erfinv": mp.erfinv, "lgamma": lgamma, "digamma": mp.digamma,
        "i0": lambda x: mp.besseli(0, x), "special.i1": lambda x: mp.besseli(1, x),
        "special.i0e": scaled(lambda x: mp.besseli(0, x)), "special.i1e": scaled(lambda x: mp.besseli(1, x)),
        "special.ndtr": mp.ncdf,
        # log(ncdf(x)) is log(1) = 0 at 40 digits from x = 13.5 on, where log_ndtr is -1e-41.
        "special.log_ndtr": lambda x: mp.log1p(-mp.ncdf(-x)) if x > 0 else mp.log(mp.ncdf(x)),
        "special.ndtri": lambda p: mp.sqrt(2) * mp.erfinv(2 * p - 1),
        "special.erfcx": lambda x: mp.exp(x * x) * mp.erfc(x),
        "special.bessel_j0": lambda x: mp.besselj(0, x), "special.bessel_j1": lambda x: mp.besselj(1, x),
        "special.bessel_y0": lambda x: mp.bessely(0, x), "special.bessel_y1": lambda x: mp.bessely(1, x),
        "special.airy_ai": mp.airyai,
        "special.modified_bessel_i0": lambda x: mp.besseli(0, x), "special.modified_bessel_i1": lambda x: mp.besseli(1, x),
        "special.modified_bessel_k0": lambda x: mp.besselk(0, x), "special.modified_bessel_k1": lambda x: mp.besselk(1, x),
        "special.scaled_modified_bessel_k0": lambda x: mp.besselk(0, x) * mp.exp(x),
        "special.scaled_modified_bessel_k1": lambda x: mp.besselk(1, x) * mp.exp(x),
    }


def mpmath_reference(name: str, inputs: torch.Tensor, budget_s: float = 60.0) -> torch.Tensor | None:
    """float64 values of op ``name`` at ``inputs`` from mpmath, or None (no mapping, or slower
    than ``budget_s``): NaN where the result is complex or undefined."""
    function = _mpmath_functions().get(name)
    if function is None:
        return None
    import mpmath

    mpmath.mp.dps = 40
    start, values = time.perf_counter(), []
    for x in inputs.tolist():
        if time.perf_counter() - start > budget_s:
            return None
        try:
            value = function(mpmath.mpf(x)) if math.isfinite(x) else math.nan
            value = value.real if isinstance(value, mpmath.mpc) and value.imag == 0 else value
            value = math.nan if isinstance(value, mpmath.mpc) else float(value)
        except (ValueError, ZeroDivisionError, OverflowError):  # mpmath's own limits (erfc(-1e308))
            value = math.nan  # and the sweep keeps eager's float64 at such a point
        values.append(value)
    return torch.tensor(values, dtype=torch.float64)


def _outputs(value: Any) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def sweep(name: str, dtype_name: str, exporters: Sequence[str], *, max_ulps: float, factor: float) -> list[dict[str, Any]]:
    """One op in one dtype: a record per exporter (or one record saying why there is none)."""
    from torch.testing._internal.opinfo.core import SampleInput

    info, dtype = op_infos()[name], FLOATING[dtype_name]
    base = {"op": name, "dtype": dtype_name}
    reason = skip_reason(info, dtype)
    if reason:
        return [{**base, "status": "skipped", "reason": reason}]
    sample = next(iter(info.sample_inputs("cpu", dtype, requires_grad=False)), None)
    if sample is None:
        return [{**base, "status": "skipped", "reason": "no sample inputs"}]
    if name in binary_ops():
        if not (sample.args and isinstance(sample.args[0], torch.Tensor)):
            return [{**base, "status": "skipped", "reason": "its first sample has no second tensor"}]
        first, second = pair_grid(dtype)
        inputs = torch.stack([first, second], dim=1)
        module = OpCall(info.op, SampleInput(first, args=(second, *sample.args[1:]), kwargs=sample.kwargs))
    else:
        low, high = info.domain if getattr(info, "domain", None) else (None, None)
        inputs = grid(dtype, edges=[edge for edge in (low, high) if edge is not None])
        module = OpCall(info.op, SampleInput(inputs, args=sample.args, kwargs=sample.kwargs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            eager = _outputs(module(*module.fresh_inputs()))
            reference = _outputs(module(*map(_as_double, module.fresh_inputs())))
            exact = mpmath_reference(name, inputs) if dtype == torch.float64 and not sample.args and not sample.kwargs else None
            if exact is not None:
                # mpmath's value where it has one; infinities and NaN as eager's (limits, not values).
                reference = [torch.where(exact.isfinite() & reference[0].isfinite(), exact, reference[0])]
            program = torch.export.export(module, module.fresh_inputs())
        except Exception as exc:  # noqa: BLE001 - an op eager or capture refuses on the grid is a result
            return [{**base, "status": "skipped", "reason": describe_exception(exc)[0][:200]}]
        records = []
        for exporter in exporters:
            record = {**base, "exporter": exporter, "points": int(inputs.shape[0]), "reference": "mpmath" if exact is not None else "eager float64"}
            start = time.perf_counter()
            try:
                onnx_program = _export(exporter, program, module.fresh_inputs())
                onnx_program.initialize_inference_session(_ort_session)
                got = _outputs(onnx_program(*module.fresh_inputs()))
            except Exception as exc:  # noqa: BLE001 - a refusal or failure is a result
                record.update(status="failed", error=describe_exception(exc)[0][:200])
                records.append(record)
                continue
            if len(got) != len(eager):
                record.update(status="failed", error=f"{len(got)} outputs, eager has {len(eager)}")
            else:
                pairs = [measure(inputs, g, e, r, max_ulps=max_ulps, factor=factor) for g, e, r in zip(got, eager, reference)]
                worst = max(range(len(pairs)), key=lambda k: (pairs[k][0].flagged > 0, pairs[k][0].max_ulps))
                record.update(
                    status="flagged" if any(p[0].flagged for p in pairs) else "ok",
                    flagged=sum(p[0].flagged for p in pairs), max_ulps=max(p[0].max_ulps for p in pairs),
                    eager_max_ulps=max(p[1].max_ulps for p in pairs), worst=pairs[worst][0].worst,
                )
            record["seconds"] = round(time.perf_counter() - start, 2)
            records.append(record)
    return records


def _arguments(x: float | list[float]) -> str:
    return ", ".join(f"{v:.6g}" for v in x) if isinstance(x, list) else f"{x:.6g}"


def _number(value: float) -> str:
    return "inf" if value == math.inf else f"{value:.3g}"


def render(machine: dict[str, Any], records: Sequence[dict[str, Any]], exporters: Sequence[str], max_ulps: float, factor: float) -> str:
    by_case: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for record in records:
        if "exporter" in record:
            by_case.setdefault((record["op"], record["dtype"]), {})[record["exporter"]] = record
    lines = [
        "# Elementwise functions over their whole range",
        "",
        f"Generated by `{machine['command']}` on {describe_machine(machine)}, torch {machine['torch']}, "
        f"onnxruntime {machine['onnxruntime']}, commit {machine['commit']}, {machine['date']}.",
        "",
        "Each unary elementwise OpInfo op, exported once per floating dtype, runs in ONNX Runtime on every",
        "decade of the dtype's range (both signs, subnormals to the largest value), a dense grid over",
        "-50..50, integers, the op's domain edges, zeros, infinities and NaN. Errors are ulps of the dtype",
        "against the op computed by eager PyTorch in float64; float64 itself against mpmath at 40 digits",
        f"for the {len(_mpmath_functions())} functions mpmath has, against eager's float64 (so eager's error is 0) for the others.",
        "A point is flagged when the export is more",
        f"than {_number(max_ulps)} ulps and more than {_number(factor)}x eager's error off there, or gives another",
        "special value (NaN, an infinity, a finite number) than eager.",
        "",
        "| dtype | ops | " + " | ".join(f"{e}: flagged ops" for e in exporters) + " | " + " | ".join(f"{e}: failed" for e in exporters) + " |",
        "|---|---:|" + "---:|" * (2 * len(exporters)),
    ]
    for dtype in FLOATING:
        cases = [c for (op, d), c in by_case.items() if d == dtype]
        if not cases:
            continue
        flagged = [sum(1 for c in cases if c.get(e, {}).get("status") == "flagged") for e in exporters]
        failed = [sum(1 for c in cases if c.get(e, {}).get("status") == "failed") for e in exporters]
        lines.append(f"| {dtype} | {len(cases)} | " + " | ".join(map(str, flagged)) + " | " + " | ".join(map(str, failed)) + " |")
    lines += [
        "",
        "## Flagged",
        "",
        "Every op and dtype where some exporter is flagged: the largest error in ulps of each exporter and",
        "of eager, and the worst flagged point of ours (input, our result, eager's, float64's).",
        "",
        "| op | dtype | " + " | ".join(f"{e}: flagged points / max ulps" for e in exporters) + " | eager max ulps | worst point of ours | what it is |",
        "|---|---|" + "---|" * len(exporters) + "---:|---|---|",
    ]
    for (op, dtype), case in by_case.items():
        if not any(r.get("status") == "flagged" for r in case.values()):
            continue
        cells = []
        for e in exporters:
            r = case.get(e, {})
            cells.append(f"{r['flagged']} / {_number(r['max_ulps'])}" if "flagged" in r else r.get("status", "–"))
        eager = next((r["eager_max_ulps"] for r in case.values() if "eager_max_ulps" in r), math.nan)
        ours = case.get(exporters[0], {})
        w = ours.get("worst") if ours.get("status") == "flagged" else None
        point = f"x={_arguments(w['x'])}: {w['got']:.6g}, eager {w['eager']:.6g}, float64 {w.get('float64', math.nan):.6g}" if w else ""
        note = NOTES.get(op, "") if w else ""  # the notes say what our flags are
        lines.append(f"| {op} | {dtype} | " + " | ".join(cells) + f" | {_number(eager)} | {point} | {note} |")
    failures = [r for r in records if r.get("status") == "failed"]
    if failures:
        lines += ["", "## Failed exports", "", "| op | dtype | exporter | error |", "|---|---|---|---|"]
        lines += [f"| {r['op']} | {r['dtype']} | {r['exporter']} | {r['error'].replace('|', '/')} |" for r in failures]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", help="comma-separated OpInfo names (default: every unary and binary elementwise op)")
    parser.add_argument("--dtypes", default=",".join(FLOATING), help="comma-separated floating dtypes")
    parser.add_argument("--exporters", default=f"{OURS},{THEIRS}", help=f"{OURS} and/or {THEIRS}")
    parser.add_argument("--ulps", type=float, default=16.0, help="errors up to this many ulps are never flagged")
    parser.add_argument("--factor", type=float, default=4.0, help="nor errors up to this many times eager's")
    parser.add_argument("--json", type=Path, default=RESULTS)
    parser.add_argument("--out", type=Path, default=PAGE)
    parser.add_argument("--render-only", action="store_true", help="rewrite the page from --json (after a change to NOTES)")
    options = parser.parse_args(argv)
    if options.render_only:
        machine, *records = [json.loads(line) for line in options.json.read_text().splitlines()]
        exporters = list(dict.fromkeys(r["exporter"] for r in records if "exporter" in r))
        options.out.write_text(render(machine, records, exporters, options.ulps, options.factor))
        return 0
    ops = options.ops.split(",") if options.ops else tail_ops() + binary_ops()
    unknown = sorted(set(ops) - set(op_infos()))
    if unknown:
        parser.error(f"unknown OpInfo names: {', '.join(unknown)}")
    exporters = options.exporters.split(",")
    if set(exporters) - {OURS, THEIRS}:
        parser.error(f"--exporters takes {OURS} and/or {THEIRS}")
    machine = machine_info("python tools/sweeps/tails.py " + " ".join(argv if argv is not None else sys.argv[1:]))
    records = []
    for dtype in options.dtypes.split(","):
        for name in ops:
            for record in sweep(name, dtype, exporters, max_ulps=options.ulps, factor=options.factor):
                records.append(record)
                if record.get("status") in ("flagged", "failed"):
                    print(json.dumps(record), flush=True)
    options.json.parent.mkdir(parents=True, exist_ok=True)
    options.json.write_text("".join(json.dumps(line) + "\n" for line in [machine, *records]))
    options.out.write_text(render(machine, records, exporters, options.ulps, options.factor))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
