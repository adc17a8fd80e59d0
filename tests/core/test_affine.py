"""core.rig.affine: closed-form inverses of 3×3 matrices and 4×4 affine transforms against np.linalg.inv."""

import numpy as np
import pytest

from core.rig.affine import inv, inv3


def test_inverses_match_lapack_on_batches_of_matrices_and_transforms():
    rng = np.random.default_rng(1)
    m3 = np.eye(3) + 0.5 * rng.normal(size=(7, 5, 3, 3))                  # any leading shape
    np.testing.assert_allclose(inv3(m3), np.linalg.inv(m3), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(inv(m3) @ m3, np.broadcast_to(np.eye(3), m3.shape), atol=1e-12)
    t = np.tile(np.eye(4), (9, 1, 1))                                       # rotation, non-uniform scale, shift
    q, _ = np.linalg.qr(rng.normal(size=(9, 3, 3)))
    t[:, :3, :3] = q * rng.uniform(0.01, 3.0, size=(9, 1, 3))
    t[:, :3, 3] = rng.normal(size=(9, 3)) * 50
    got = inv(t)
    np.testing.assert_allclose(got, np.linalg.inv(t), rtol=1e-10, atol=1e-9)
    assert np.array_equal(got[:, 3], np.tile([0.0, 0.0, 0.0, 1.0], (9, 1)))
    np.testing.assert_allclose(inv(t[0]) @ t[0], np.eye(4), atol=1e-10)     # one matrix, no batch
    p = t[0].copy()
    p[3] = [0.1, 0.0, 0.0, 1.0]                                             # projective: LAPACK's answer
    np.testing.assert_allclose(inv(p), np.linalg.inv(p), rtol=1e-12)


def test_a_singular_matrix_raises_as_lapack_does():
    m = np.eye(3)
    m[2] = m[1]
    with pytest.raises(np.linalg.LinAlgError):
        inv3(m)
    t = np.eye(4)
    t[:3, :3] = 0.0
    with pytest.raises(np.linalg.LinAlgError):
        inv(t)
