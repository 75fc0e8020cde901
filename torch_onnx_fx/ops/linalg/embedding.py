"""Complex Hermitian eigenvalues, singular values and the pseudo-inverse, through the real embedding.

``A = X + iY`` (``m x n``) embeds as the real ``[[X, -Y], [Y, X]]`` (``2m x 2n``). The embedding
keeps products and turns the conjugate transpose into the transpose, so the embedding of a
Hermitian matrix is symmetric with each eigenvalue of ``A`` twice, the embedding's singular values
are ``A``'s twice, and the pseudo-inverse and exponential of the embedding are the embeddings
of ``A``'s — all exact, so the real Jacobi translations compute them. Eigen- and singular *vectors* are not
offered: they are fixed only up to a complex phase, which eager takes from LAPACK's own
algorithm, and a repeated eigenvalue of ``A`` would leave the embedding's vectors mixing the
pairs; those nodes keep their missing-translation error.
"""

from __future__ import annotations

import operator
from typing import Any

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.ops.complex.real_view import _im, _join, _re
from torch_onnx_fx.ops.linalg import _matrix as mx
from torch_onnx_fx.ops.linalg.eigen import aten_linalg_eigh, aten_linalg_pinv, aten_linalg_svd
from torch_onnx_fx.ops.linalg.matrix_exp import aten_linalg_matrix_exp
from torch_onnx_fx.registry import register, wants_context

__all__ = [
    "aten_linalg_eigvalsh_complex", "aten_linalg_svdvals_complex", "aten_linalg_pinv_complex", "aten_linalg_matrix_exp_complex",
]


def _parts(z: ir.Value) -> tuple[ir.Value, ir.Value]:
    dims = mx.dims(z)[:-1]
    return mx.shaped(_re(z), dims), mx.shaped(_im(z), dims)


def _embed(re: ir.Value, im: ir.Value) -> ir.Value:
    top = op.Concat(re, op.Neg(im), axis=-1)
    bottom = op.Concat(im, re, axis=-1)
    dims = mx.dims(re)
    doubled = [d * 2 if isinstance(d, int) else None for d in dims[-2:]]
    return mx.shaped(op.Concat(top, bottom, axis=-2), [*dims[:-2], *doubled])


def _unembed(m: ir.Value) -> ir.Value:
    """The complex matrix (real view) whose embedding is ``m``: its left column of blocks."""
    rows, cols = op.Div(mx.size(m, -2), 2), op.Div(mx.size(m, -1), 2)
    left = op.Gather(m, op.Range(0, cols, 1), axis=-1)
    re = op.Gather(left, op.Range(0, rows, 1), axis=-2)
    im = op.Gather(left, op.Range(rows, op.Mul(rows, 2), 1), axis=-2)
    return _join(re, im)


def _hermitian(z: ir.Value, upper: bool) -> tuple[ir.Value, ir.Value]:
    """The parts of the Hermitian matrix stored in one triangle of ``z``, as LAPACK reads it:
    Re symmetric and Im antisymmetric, the diagonal's imaginary part ignored."""
    re, im = _parts(z)
    strict = 1 if upper else -1
    stored_im = mx.tril(im, upper, strict)
    return op.Add(mx.tril(re, upper), mx.mT(mx.tril(re, upper, strict))), op.Sub(stored_im, mx.mT(stored_im))


def _every_other(values: ir.Value) -> ir.Value:
    """One of each equal pair of a sorted list of doubled values."""
    return op.Gather(values, op.Range(0, mx.size(values, -1), 2), axis=-1)


def _only_outputs(*used: int) -> Any:
    """Accepts nodes whose results outside ``used`` are not read (torch's decompositions of
    eigvalsh and svdvals ask for vectors, then drop them)."""

    def accepts(node: torch.fx.Node) -> bool:
        return all(user.target is operator.getitem and user.args[1] in used for user in node.users)

    return accepts


@register("aten::_linalg_eigh", complex=True, supports=_only_outputs(0))
@wants_context
def aten_linalg_eigvalsh_complex(
    A: ir.Value, UPLO: str = "L", compute_v: bool = True, *, ctx: OpContext
) -> tuple[ir.Value, ir.Value]:
    """_linalg_eigh(Tensor A, str UPLO="L", bool compute_v=True) of Hermitian complex matrices:
    the eigenvalues (real), from one triangle of ``A`` as LAPACK reads it (the diagonal's
    imaginary part ignored)"""
    values, _ = aten_linalg_eigh(_embed(*_hermitian(mx.double(A), UPLO == "U")), "L", False, ctx=ctx)
    return mx.like(_every_other(values), A), mx.empty(A)


@register("aten::_linalg_svd", complex=True, supports=_only_outputs(1))
@wants_context
def aten_linalg_svdvals_complex(
    A: ir.Value, full_matrices: bool = False, compute_uv: bool = True, *, driver: str | None = None, ctx: OpContext
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """_linalg_svd(Tensor A, bool full_matrices=False, bool compute_uv=True, *, str? driver=None) of
    complex matrices: the singular values (real, descending)"""
    _, values, _ = aten_linalg_svd(_embed(*_parts(mx.double(A))), False, False, ctx=ctx)
    return mx.empty(A), mx.like(_every_other(values), A), mx.empty(A)


@register("aten::linalg_pinv.atol_rtol_tensor", complex=True)
@wants_context
def aten_linalg_pinv_complex(
    self: ir.Value, *, atol: ir.Value | None = None, rtol: ir.Value | None = None, hermitian: bool = False, ctx: OpContext
) -> ir.Value:
    """linalg_pinv.atol_rtol_tensor(Tensor self, *, Tensor? atol=None, Tensor? rtol=None, bool hermitian=False) -> Tensor
    of complex matrices: the embedding's pseudo-inverse, with the same singular values and so the
    same cut-off"""
    parts = _hermitian(self, upper=False) if hermitian else _parts(self)
    embedded = _embed(*parts)
    inverse = aten_linalg_pinv(embedded, atol=atol, rtol=rtol, hermitian=hermitian, ctx=ctx)
    return _unembed(inverse)


@register("aten::linalg_matrix_exp", complex=True)
@wants_context
def aten_linalg_matrix_exp_complex(self: ir.Value, *, ctx: OpContext) -> ir.Value:
    """linalg_matrix_exp(Tensor self) -> Tensor of complex matrices: the exponential of the
    embedding (a power series, which the embedding keeps term by term)"""
    return _unembed(aten_linalg_matrix_exp(_embed(*_parts(self)), ctx=ctx))
