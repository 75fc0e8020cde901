"""Linear algebra operators (torch_onnx_fx/ops/linalg/), exported and compared with eager PyTorch.

Eigen- and singular vectors are only determined up to sign and LAPACK's signs come from its own
algorithm, so they are compared through sign-free quantities (absolute values, reconstructions).
Loop-based translations are also exported with dynamic batch and matrix sizes and run on a second
size.
"""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

from helpers import assert_matches_eager

_HAS_CHOLESKY = tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 15)

RTOL, ATOL = 1e-3, 1e-5


def invertible(*shape: int) -> torch.Tensor:
    """Random matrices kept well away from singular by a dominant diagonal."""
    return torch.randn(*shape) + shape[-1] * torch.eye(shape[-1])


def spd(*shape: int) -> torch.Tensor:
    a = torch.randn(*shape)
    return a @ a.mT + shape[-1] * torch.eye(shape[-1])


def symmetric(*shape: int) -> torch.Tensor:
    a = torch.randn(*shape)
    return a + a.mT


def eigh_abs(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    values, vectors = torch.linalg.eigh(a)
    return values, vectors.abs()


def svd_abs(a: torch.Tensor) -> tuple[torch.Tensor, ...]:
    u, s, vh = torch.linalg.svd(a, full_matrices=False)
    return u.abs(), s, vh.abs(), (u * s.unsqueeze(-2)) @ vh


def svd_full(a: torch.Tensor) -> list[torch.Tensor]:
    # The completed columns (rows of Vh) are any orthonormal basis of the rest: only orthogonality
    # is compared for them.
    results = []
    for matrix in (a, a.mT):
        u, s, vh = torch.linalg.svd(matrix)
        k = s.shape[-1]
        results += [u[..., :k].abs(), s, vh[..., :k, :].abs(), u.mT @ u, vh @ vh.mT]
    return results


CASES = {
    "inv": (lambda a: torch.linalg.inv(a), lambda: (invertible(4, 4),)),
    "inv_ex_batched": (lambda a: torch.linalg.inv_ex(a), lambda: (invertible(2, 3, 4, 4),)),
    "inv_pivoting": (lambda a: torch.linalg.inv(a), lambda: (torch.randn(6, 6),)),
    "solve_vector_and_matrix": (
        lambda a, b, c: (torch.linalg.solve(a, b), torch.linalg.solve(a, c), torch.linalg.solve(a, c.mT, left=False)),
        lambda: (torch.randn(2, 5, 5), torch.randn(2, 5), torch.randn(5, 3)),
    ),
    "solve_ex": (lambda a, b: torch.linalg.solve_ex(a, b), lambda: (torch.randn(4, 4), torch.randn(4, 2))),
    "lu_factor_wide_and_tall": (
        lambda a: (*torch.linalg.lu_factor_ex(a), *torch.linalg.lu_factor(a.mT)),
        lambda: (torch.randn(2, 3, 5),),
    ),
    "lu": (lambda a: torch.linalg.lu(a), lambda: (torch.randn(3, 4, 4),)),
    # The pivot rows stay as they are (minus 0 * inf was NaN): LAPACK never touches them.
    "lu_factor_nonfinite": (
        lambda a: torch.linalg.lu_factor_ex(a),
        lambda: (torch.tensor([[4.0, 1.0, 2.0, 3.0, 1.0], [1.0, 5.0, float("inf"), 1.0, 2.0], [2.0, 1.0, 3.0, 6.0, float("nan")]]),),
    ),
    # A reflector touches rows j.. and columns j.. only (0 * inf above them was NaN), and Q's column
    # j is e_j - tau v, written directly: column 0 of A finite keeps Q[:, 0] and R[0, 0] finite.
    "qr_nonfinite": (
        lambda a: (*torch.linalg.qr(a), *torch.geqrf(a)),
        lambda: (torch.tensor([[1.0, 2.0, float("inf"), 0.5], [2.0, float("nan"), 1.0, 3.0], [0.5, 1.0, 2.0, float("-inf")], [1.5, 0.2, 0.3, 0.4]]),),
    ),
    "householder_product_nonfinite": (
        lambda a, tau: torch.linalg.householder_product(a, tau),
        lambda: (torch.tensor([[2.0, 0.4, -0.9], [0.8, -1.8, float("-inf")], [float("nan"), 0.3, 1.1], [0.4, -0.8, 0.6]]), torch.tensor([0.9, -0.2, 1.1])),
    ),
    # A NaN pivot over a zero column is singular (no exchange, no elimination, info set): it took
    # an exchange with a finished row, which put a finite number where the NaN was. Over a nonzero
    # column it goes on to the exchange tests, as x86's max(NaN, colmax) = colmax makes LAPACK do.
    "ldl_factor_nan_pivot": (
        lambda a: torch.linalg.ldl_factor_ex(a),
        lambda: (torch.tensor([[[2.0, 0.0], [0.0, float("nan")]], [[float("nan"), 0.0], [0.0, 2.0]], [[float("nan"), 1.0], [1.0, 3.0]],
                               [[2.0, 1.0], [1.0, float("nan")]]], dtype=torch.float64),),
    ),
    "ldl_factor_nan_pivot_4x4": (
        lambda a: torch.linalg.ldl_factor_ex(a),
        lambda: (torch.tensor([[float("nan"), 0.3, -1.2, 0.8], [0.3, 1.1, 0.4, -0.6], [-1.2, 0.4, -2.0, 0.9], [0.8, -0.6, 0.9, 0.5]],
                              dtype=torch.float64),),
    ),
    "lu_unpack": (lambda lu, piv: torch.lu_unpack(lu, piv), lambda: torch.linalg.lu_factor(torch.randn(2, 5, 3))),
    "lu_solve_variants": (
        lambda lu, piv, b: tuple(
            torch.linalg.lu_solve(lu, piv, b if left else b.mT, left=left, adjoint=adjoint)
            for left in (True, False)
            for adjoint in (True, False)
        ),
        lambda: (*torch.linalg.lu_factor(invertible(4, 4)), torch.randn(4, 4)),
    ),
    "slogdet_det": (
        lambda a: (*torch.linalg.slogdet(a), torch.logdet(a @ a.mT)),
        lambda: (torch.randn(3, 4, 4),),
    ),
    "solve_triangular": (
        lambda a, b: tuple(
            torch.linalg.solve_triangular(a, b if left else b.mT, upper=upper, left=left, unitriangular=unit)
            for upper in (True, False)
            for left in (True, False)
            for unit in (True, False)
        ),
        lambda: (invertible(4, 4), torch.randn(2, 4, 4)),
    ),
    "triangular_solve": (
        lambda b, a: (*torch.triangular_solve(b, a), *torch.triangular_solve(b, a, upper=False, transpose=True)),
        lambda: (torch.randn(2, 4, 3), invertible(4, 4)),
    ),
    "cholesky_family": (
        lambda a, b: (
            torch.linalg.cholesky(a),
            *torch.linalg.cholesky_ex(a, upper=True),
            # torch.cholesky, deprecated since 1.9, is gone in 2.15; before it, aten::cholesky.
            torch.cholesky(a, upper=True) if _HAS_CHOLESKY else torch.linalg.cholesky(a, upper=True),
            torch.cholesky_inverse(torch.linalg.cholesky(a)),
            torch.cholesky_inverse(torch.linalg.cholesky(a, upper=True), upper=True),
            torch.cholesky_solve(b, torch.linalg.cholesky(a)),
            torch.cholesky_solve(b, torch.linalg.cholesky(a, upper=True), upper=True),
        ),
        lambda: (spd(2, 4, 4), torch.randn(4, 2)),
    ),
    "cholesky_not_positive_definite": (lambda a: torch.linalg.cholesky_ex(a)[1], lambda: (torch.diag(torch.tensor([2.0, 1.0, -1.0, 3.0])),)),
    "qr_modes": (
        lambda a: (*torch.linalg.qr(a), *torch.linalg.qr(a.mT), *torch.linalg.qr(a, mode="complete"), torch.linalg.qr(a, mode="r")[1]),
        lambda: (torch.randn(2, 5, 3),),
    ),
    "geqrf_householder_ormqr": (
        lambda a, c: (
            *torch.geqrf(a),
            torch.linalg.householder_product(*torch.geqrf(a)),
            *(torch.ormqr(*torch.geqrf(a), c, left=left, transpose=t) for left in (True, False) for t in (True, False)),
        ),
        lambda: (torch.randn(4, 4), torch.randn(4, 4)),
    ),
    "eigh": (eigh_abs, lambda: (symmetric(2, 5, 5),)),
    "eigvalsh_upper": (lambda a: torch.linalg.eigvalsh(a, UPLO="U"), lambda: (torch.randn(6, 6),)),
    "svd": (svd_abs, lambda: (torch.randn(2, 4, 6),)),
    "svd_tall_and_values": (
        lambda a: (torch.linalg.svdvals(a), torch.svd(a).S, torch.linalg.svd(a[:3]).S),
        lambda: (torch.randn(5, 3),),
    ),
    "rank_norm_cond": (
        lambda a: (torch.linalg.matrix_rank(a), torch.linalg.matrix_rank(a[0] @ a[0].mT, hermitian=True), torch.linalg.norm(a, "nuc", (1, 2)), torch.linalg.cond(a)),
        lambda: (torch.randn(3, 4, 4),),
    ),
    "pinv": (
        lambda a, b: (torch.linalg.pinv(a), torch.linalg.pinv(a.mT), torch.linalg.pinv(b @ b.mT, hermitian=True), torch.linalg.pinv(a, atol=0.5), torch.pinverse(a)),
        lambda: (torch.randn(2, 3, 5), torch.randn(4, 2)),
    ),
    "svd_full_matrices": (svd_full, lambda: (torch.randn(2, 5, 3),)),
    "ldl": (
        lambda a, b: (*torch.linalg.ldl_factor_ex(a), torch.linalg.ldl_solve(*torch.linalg.ldl_factor(a), b)),
        lambda: (symmetric(8, 6, 6), torch.randn(6, 2)),
    ),
    "matrix_exp": (lambda a: torch.linalg.matrix_exp(a), lambda: (torch.stack([torch.randn(4, 4) * 0.1, torch.randn(4, 4), torch.zeros(4, 4)]),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_linalg_matches_eager(name):
    fn, make_args = CASES[name]
    assert_matches_eager(fn, make_args(), rtol=RTOL, atol=ATOL)


def test_matrix_exp_scaling_and_squaring():
    # Norms up to ~20 need several squarings, different per matrix of the batch.
    a = torch.randn(3, 4, 4, dtype=torch.float64) * torch.tensor([0.1, 2.0, 5.0], dtype=torch.float64)[:, None, None]
    assert_matches_eager(lambda x: torch.linalg.matrix_exp(x), (a,), rtol=1e-9, atol=1e-9)


BATCH, SIZE = Dim("batch"), Dim("size", min=2)
SQUARE = ({0: BATCH, 1: SIZE, 2: SIZE},)

DYNAMIC = {
    "inv": (lambda a: torch.linalg.inv(a), invertible, SQUARE),
    "solve": (
        lambda a, b: torch.linalg.solve(a, b),
        lambda b, n: (invertible(b, n, n), torch.randn(b, n, 2)),
        ({0: BATCH, 1: SIZE, 2: SIZE}, {0: BATCH, 1: SIZE}),
    ),
    "lu_factor": (lambda a: torch.linalg.lu_factor_ex(a), lambda b, n: (torch.randn(b, n, n + 1),), ({0: BATCH, 1: SIZE, 2: Dim("cols", min=3)},)),
    "cholesky": (lambda a: torch.linalg.cholesky(a), spd, SQUARE),
    "solve_triangular": (
        lambda a, b: torch.linalg.solve_triangular(a, b, upper=True),
        lambda b, n: (invertible(b, n, n), torch.randn(b, n, 3)),
        ({0: BATCH, 1: SIZE, 2: SIZE}, {0: BATCH, 1: SIZE}),
    ),
    "qr": (lambda a: torch.linalg.qr(a), lambda b, n: (torch.randn(b, n + 2, n),), ({0: BATCH, 1: Dim("rows", min=4), 2: SIZE},)),
    "eigvalsh": (lambda a: torch.linalg.eigvalsh(a), symmetric, SQUARE),
    "svdvals_pinv": (lambda a: (torch.linalg.svdvals(a), torch.linalg.pinv(a)), lambda b, n: (torch.randn(b, n, n),), SQUARE),
    "matrix_exp": (lambda a: torch.linalg.matrix_exp(a), lambda b, n: (torch.randn(b, n, n),), SQUARE),
}


def _arguments(make, batch: int, size: int) -> tuple[torch.Tensor, ...]:
    made = make(batch, size, size) if make in (invertible, spd, symmetric) else make(batch, size)
    return made if isinstance(made, tuple) else (made,)


@pytest.mark.parametrize("name", sorted(DYNAMIC))
def test_linalg_dynamic_sizes(name):
    fn, make, dynamic_shapes = DYNAMIC[name]
    program = assert_matches_eager(
        fn, _arguments(make, 2, 4), dynamic_shapes=dynamic_shapes, more_inputs=[(_arguments(make, 3, 6), {})], rtol=RTOL, atol=ATOL
    )
    assert any(node.op_type == "Loop" for node in program.model.graph)


def _complex(*shape: int, dtype: torch.dtype = torch.complex64, dominant: bool = True) -> torch.Tensor:
    a = torch.randn(*shape, dtype=dtype)
    return a + shape[-1] * torch.eye(shape[-1]) if dominant else a


def _hermitian_positive(*shape: int, dtype: torch.dtype = torch.complex64) -> torch.Tensor:
    a = torch.randn(*shape, dtype=dtype)
    return a @ a.mH + shape[-1] * torch.eye(shape[-1])


# The LU, triangular and Cholesky translations run over the complex numbers too (ops/linalg/field.py).
COMPLEX_CASES = {
    "lu_factor": (torch.linalg.lu_factor, lambda d: (_complex(2, 4, 4, dtype=d, dominant=False),)),
    "lu": (torch.linalg.lu, lambda d: (_complex(2, 4, 3, dtype=d, dominant=False)[..., :3, :],)),
    "lu_unpack": (lambda a: torch.lu_unpack(*torch.linalg.lu_factor(a)), lambda d: (_complex(4, 4, dtype=d, dominant=False),)),
    "lu_solve_adjoint_right": (
        lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b, left=False, adjoint=True),
        lambda d: (_complex(2, 4, 4, dtype=d), torch.randn(2, 3, 4, dtype=d)),
    ),
    "lu_solve_adjoint": (
        lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b, adjoint=True),
        lambda d: (_complex(4, 4, dtype=d), torch.randn(4, 2, dtype=d)),
    ),
    "inv_ex_batched": (torch.linalg.inv_ex, lambda d: (_complex(3, 4, 4, dtype=d),)),
    "solve_vector": (torch.linalg.solve, lambda d: (_complex(2, 4, 4, dtype=d), torch.randn(2, 4, dtype=d))),
    "solve_unbatched_rhs": (torch.linalg.solve, lambda d: (_complex(3, 4, 4, dtype=d), torch.randn(4, 2, dtype=d))),
    "lu_solve_batched_rhs": (
        lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b),
        lambda d: (_complex(4, 4, dtype=d), torch.randn(3, 4, 2, dtype=d)),
    ),
    "cholesky_solve_batched_factor": (
        lambda h, b: torch.cholesky_solve(b, torch.linalg.cholesky(h)),
        lambda d: (_hermitian_positive(3, 4, 4, dtype=d), torch.randn(4, 2, dtype=d)),
    ),
    "solve_right": (lambda a, b: torch.linalg.solve(a, b, left=False), lambda d: (_complex(4, 4, dtype=d), torch.randn(3, 4, dtype=d))),
    "slogdet": (torch.linalg.slogdet, lambda d: (_complex(2, 4, 4, dtype=d, dominant=False),)),
    "det": (torch.linalg.det, lambda d: (_complex(2, 3, 3, dtype=d, dominant=False),)),
    "det_singular": (torch.linalg.det, lambda d: (torch.zeros(3, 3, dtype=d),)),
    "solve_triangular_right": (
        lambda a, b: torch.linalg.solve_triangular(a.tril(), b, upper=False, left=False),
        lambda d: (_complex(4, 4, dtype=d), torch.randn(2, 4, dtype=d)),
    ),
    "triangular_solve_transposed": (
        lambda b, a: torch.triangular_solve(b, a.triu(), transpose=True),
        lambda d: (torch.randn(2, 4, 3, dtype=d), _complex(4, 4, dtype=d)),
    ),
    "cholesky_upper": (lambda h: torch.linalg.cholesky(h, upper=True), lambda d: (_hermitian_positive(2, 4, 4, dtype=d),)),
    "cholesky_ex": (torch.linalg.cholesky_ex, lambda d: (_hermitian_positive(4, 4, dtype=d),)),
    "cholesky_inverse": (lambda h: torch.cholesky_inverse(torch.linalg.cholesky(h)), lambda d: (_hermitian_positive(2, 4, 4, dtype=d),)),
    "cholesky_solve_upper": (
        lambda h, b: torch.cholesky_solve(b, torch.linalg.cholesky(h, upper=True), upper=True),
        lambda d: (_hermitian_positive(4, 4, dtype=d), torch.randn(4, 2, dtype=d)),
    ),
    "lu_unpack_pivots_only": (
        lambda a: torch.lu_unpack(*torch.linalg.lu_factor(a), unpack_data=False), lambda d: (_complex(3, 3, dtype=d, dominant=False),)
    ),
    "qr_wide": (torch.linalg.qr, lambda d: (torch.randn(2, 3, 5, dtype=d),)),
    "qr_complete": (lambda a: torch.linalg.qr(a, mode="complete"), lambda d: (torch.randn(5, 3, dtype=d),)),
    "qr_r": (lambda a: torch.linalg.qr(a, mode="r"), lambda d: (torch.randn(4, 3, dtype=d),)),
    "geqrf": (torch.geqrf, lambda d: (torch.randn(2, 5, 3, dtype=d),)),
    "householder_product": (lambda a: torch.linalg.householder_product(*torch.geqrf(a)), lambda d: (torch.randn(5, 3, dtype=d),)),
    "ormqr_right_adjoint": (
        lambda a, c: torch.ormqr(*torch.geqrf(a), c, left=False, transpose=True),
        lambda d: (torch.randn(2, 5, 3, dtype=d), torch.randn(2, 4, 5, dtype=d)),
    ),
    "ormqr_left": (lambda a, c: torch.ormqr(*torch.geqrf(a), c), lambda d: (torch.randn(5, 3, dtype=d), torch.randn(5, 2, dtype=d))),
    # Through the real embedding (ops/linalg/embedding.py): values only, and the pseudo-inverse.
    "eigvalsh_upper": (lambda h: torch.linalg.eigvalsh(h, UPLO="U"), lambda d: (_hermitian_positive(2, 4, 4, dtype=d),)),
    "eigvalsh_reads_one_triangle": (torch.linalg.eigvalsh, lambda d: (torch.randn(4, 4, dtype=d),)),
    "svdvals_wide": (torch.linalg.svdvals, lambda d: (torch.randn(2, 3, 5, dtype=d),)),
    "matrix_rank_deficient": (torch.linalg.matrix_rank, lambda d: (torch.randn(5, 2, dtype=d) @ torch.randn(2, 4, dtype=d),)),
    "nuclear_norm": (lambda a: torch.linalg.matrix_norm(a, "nuc"), lambda d: (torch.randn(4, 3, dtype=d),)),
    "matrix_exp": (torch.linalg.matrix_exp, lambda d: (torch.randn(2, 3, 3, dtype=d),)),
    "pinv_tall": (torch.linalg.pinv, lambda d: (torch.randn(2, 5, 3, dtype=d),)),
    "pinv_hermitian_reads_lower": (lambda a: torch.linalg.pinv(a, hermitian=True), lambda d: (torch.randn(4, 4, dtype=d),)),
}


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("name", sorted(COMPLEX_CASES))
def test_complex_linalg(name, dtype):
    fn, make_args = COMPLEX_CASES[name]
    tolerance = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.complex64 else {"rtol": 1e-10, "atol": 1e-12}
    assert_matches_eager(lambda *args: fn(*args), make_args(dtype), **tolerance)


def test_complex_singular_vectors_are_declined():
    # Fixed only up to a complex phase that eager takes from LAPACK: no translation, a clear error.
    with pytest.raises(Exception, match="_linalg_svd"):
        assert_matches_eager(lambda a: torch.linalg.svd(a), (torch.randn(3, 3, dtype=torch.complex64),))


@pytest.mark.parametrize(
    "fn",
    [torch.linalg.det, torch.det, torch.logdet, lambda a: torch.linalg.det(a[0] * 0)],
    ids=["linalg_det", "det", "logdet", "singular"],
)
def test_float64_determinant_from_lu(fn):
    # ONNX Runtime has no float64 Det: the LU translation computes it (negative dets: logdet NaN).
    assert_matches_eager(lambda a: fn(a), (torch.randn(3, 4, 4, dtype=torch.float64),), rtol=1e-10, atol=1e-12)


def test_triangular_solves_keep_solved_rows_of_non_finite_systems():
    # A solved row minus 0 * (a later row holding inf) was NaN: only pending rows change now.
    inf, nan = float("inf"), float("nan")
    lower = torch.tensor([[2.0, 0.0, 0.0], [1.0, 3.0, 0.0], [0.5, -1.0, 4.0]])
    b = torch.tensor([[1.0, inf], [2.0, 1.0], [nan, 3.0]])

    def model(lower, b):
        return (
            torch.linalg.solve_triangular(lower, b, upper=False),
            torch.linalg.solve_triangular(lower.mT, b, upper=True),
            torch.linalg.solve_triangular(lower, b.mT, upper=False, left=False),
        )

    assert_matches_eager(model, (lower, b))


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_lu_solves_keep_an_infinite_right_hand_side_to_its_column(dtype):
    # B's rows were permuted by a product with the permutation matrix: 0 * inf made the whole
    # column of an inf NaN, where eager (LAPACK swaps rows) has -inf, inf and the finite rest.
    # A pivots (rows swap) and is batched against B's broadcast batch.
    inf = float("inf")
    a = torch.tensor([[[1.0, 2.0, 0.0], [4.0, 1.0, 1.0], [0.5, 3.0, 2.0]]], dtype=dtype)
    b = torch.tensor([[1.0, 0.0], [2.0, 1.0], [inf, 3.0]], dtype=dtype).expand(2, 3, 2).clone()
    b[1, 0, 1] = -inf

    def model(a, b):
        lu, pivots = torch.linalg.lu_factor(a)
        return (
            torch.linalg.lu_solve(lu, pivots, b),
            torch.linalg.lu_solve(lu, pivots, b, adjoint=True),
            torch.linalg.lu_solve(lu, pivots, b.mT, left=False),
            torch.linalg.solve(a, b),
        )

    assert not torch.equal(torch.linalg.lu_factor(a)[1], torch.tensor([[1, 2, 3]], dtype=torch.int32))
    assert_matches_eager(model, (a, b), rtol=1e-10, atol=1e-12)


def test_slogdet_sign_of_a_matrix_holding_nan_is_zero():
    # torch's sign of NaN is 0; ONNX's Sign of NaN is NaN.
    nan = float("nan")
    assert_matches_eager(lambda a: torch.linalg.slogdet(a), (torch.tensor([[[nan]], [[2.0]], [[-3.0]]], dtype=torch.float64),))


FACTORIZATIONS_AT_EXTREMES = {
    "geqrf": lambda a: torch.geqrf(a),
    "qr": lambda a: torch.linalg.qr(a),
    "eigh": lambda a: eigh_abs(a + a.mT),
    "eigvalsh": lambda a: torch.linalg.eigvalsh(a + a.mT),
    "svdvals": lambda a: torch.linalg.svdvals(a),
    "svdvals-wide": lambda a: torch.linalg.svdvals(a[..., :3, :]),
    "matrix_norm": lambda a: (torch.linalg.matrix_norm(a, "nuc"), torch.linalg.matrix_norm(a, 2), torch.linalg.matrix_norm(a, -2)),
    "cond": lambda a: torch.linalg.cond(a),
    "pinv": lambda a: torch.linalg.pinv(a),
    "ldl": lambda a: (*torch.linalg.ldl_factor(a + a.mT), torch.linalg.ldl_solve(*torch.linalg.ldl_factor(a + a.mT), a[..., :2])),
}


@pytest.mark.parametrize("scale", [1e300, 1e-300, 1e160, 1e-170])
@pytest.mark.parametrize("name", sorted(FACTORIZATIONS_AT_EXTREMES))
def test_float64_factorizations_of_huge_and_tiny_matrices(name, scale):
    """Squares of float64 entries past 1e154 overflowed (and below 1e-162 vanished) in the
    reflectors' and Jacobi's norms, where LAPACK scales them: R, the eigen- and singular values
    came out inf, NaN or 0; pinv's 1 / sigma^2 and LDL's 2x2 determinants and pivot tests did the
    same. Norms and rotations now work on values scaled by a power of two, pinv divides by sigma
    twice and LDL forms its 2x2 blocks through ratios, as LAPACK does."""
    torch.manual_seed(0)
    a = torch.randn(2, 4, 4, dtype=torch.float64) * scale
    assert_matches_eager(FACTORIZATIONS_AT_EXTREMES[name], (a,), rtol=1e-9, atol=0)
