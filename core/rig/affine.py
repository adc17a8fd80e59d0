"""Inverses of 3×3 matrices and 4×4 affine transforms in closed form, in plain numpy.

``np.linalg.inv`` calls LAPACK once per matrix, and numpy's OpenBLAS runs those calls on its thread pool: on a
few dozen 4×4 bone transforms the threads' start-up costs far more than the arithmetic, and a busy machine makes
it worse (``tools/experiments/small_inverse.py`` measures both). The set-up of every solve and every Live window
inverts such transforms (bind matrices, the hips' Jacobian, each body segment's frame), so the core does it here:
the adjugate over the determinant, elementwise, any leading batch shape, float64.
"""

from __future__ import annotations

import numpy as np


def inv3(m) -> np.ndarray:
    """(..., 3, 3) inverses of (..., 3, 3) matrices: the adjugate (cofactors, transposed) over the determinant.
    Raises ``np.linalg.LinAlgError`` on a singular matrix, as ``np.linalg.inv`` does."""
    m = np.asarray(m, dtype=np.float64)
    a, b, c = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
    d, e, f = m[..., 1, 0], m[..., 1, 1], m[..., 1, 2]
    g, h, i = m[..., 2, 0], m[..., 2, 1], m[..., 2, 2]
    A, B, C = e * i - f * h, f * g - d * i, d * h - e * g             # cofactors of the first row
    det = a * A + b * B + c * C
    if not np.all(np.isfinite(det)) or np.any(det == 0.0):
        raise np.linalg.LinAlgError("Singular matrix")
    out = np.empty(m.shape)
    out[..., 0, 0], out[..., 1, 0], out[..., 2, 0] = A, B, C
    out[..., 0, 1], out[..., 1, 1], out[..., 2, 1] = c * h - b * i, a * i - c * g, b * g - a * h
    out[..., 0, 2], out[..., 1, 2], out[..., 2, 2] = b * f - c * e, c * d - a * f, a * e - b * d
    return out / det[..., None, None]


def inv(m) -> np.ndarray:
    """Inverse of (..., 3, 3) matrices, or of (..., 4, 4) affine transforms (last row 0 0 0 1: [A⁻¹ | −A⁻¹ t]),
    in closed form; any other 4×4 matrix (a projective last row) goes to ``np.linalg.inv``."""
    m = np.asarray(m, dtype=np.float64)
    if m.shape[-2:] == (3, 3):
        return inv3(m)
    if m.shape[-2:] != (4, 4) or not np.array_equal(m[..., 3, :], np.broadcast_to([0.0, 0.0, 0.0, 1.0],
                                                                                     m.shape[:-2] + (4,))):
        return np.linalg.inv(m)
    a = inv3(m[..., :3, :3])
    out = np.zeros_like(m)
    out[..., :3, :3] = a
    out[..., :3, 3] = -(a * m[..., None, :3, 3]).sum(-1)
    out[..., 3, 3] = 1.0
    return out
