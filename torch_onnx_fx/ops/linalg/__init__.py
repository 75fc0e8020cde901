"""Linear algebra: factorizations, solves, inverses, eigenvalues, singular values, matrix exponential.

ONNX has no linear algebra beyond ``MatMul`` and ``Det``, torchlib translates none of these
operators and PyTorch has no decomposition for them, so each is written out as the textbook
algorithm over an ONNX ``Loop`` whose iterations walk the matrix dimension. Every step works on the
whole batch ``(..., m, n)`` at once: rows and columns are picked with ``Gather`` and written back
through ``Where`` with one-hot masks, so batch and matrix sizes may be dynamic.

* :mod:`.lu` - LU with partial pivoting and what is built on it (solve, inverse, log-determinant,
  ``lu_*``), triangular solves, Cholesky.
* :mod:`.qr` - Householder QR (``geqrf``, ``householder_product``, ``ormqr``, ``qr``).
* :mod:`.eigen` - symmetric eigenvalues, singular values and the pseudo-inverse (Jacobi).
* :mod:`.ldl` - symmetric indefinite ``LDL^T`` with Bunch-Kaufman pivoting.
* :mod:`.matrix_exp` - the matrix exponential (scaling and squaring).
* :mod:`._matrix` - the shared pieces: shapes, masks, reductions and the ``Loop`` builder.

Choices that make the results agree with eager PyTorch (LAPACK):

* Work is done in float64 and cast back, so float32 results match LAPACK's to its own rounding.
* Pivoted factorizations make LAPACK's pivot choices (LU: largest magnitude in the column, first
  on ties; LDL: Bunch-Kaufman's tests), so ``pivots`` outputs and the factors are LAPACK's.
* QR uses LAPACK's Householder convention (``beta = -sign(alpha) * norm``), so Q and R match.
* Eigen- and singular vectors are only determined up to sign. LAPACK's signs fall out of its own
  iterations (and MKL's differ from the reference ones), so those outputs agree with eager only
  where the sign does not matter: values, pseudo-inverses, reconstructions, ranks, norms.
* ``info`` outputs report what LAPACK would (a zero pivot, a non-positive Cholesky minor) as int32.
* Complex inputs are declined (``supports``), so they fail with a missing-translation error
  rather than a wrong result.
"""

from torch_onnx_fx.ops.linalg import eigen, embedding, ldl, lu, matrix_exp, qr  # noqa: F401

__all__: list[str] = []
