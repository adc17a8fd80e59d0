import numpy as np
import torch

from core.rig.rotations import (matrix_to_quat, matrix_to_sixd, quat_between, quat_conjugate, quat_make_continuous,
                            quat_multiply, quat_normalize, quat_rotate, quat_to_matrix, sixd_to_matrix)


def _rand_quats(n, seed=0):
    return quat_normalize(np.random.default_rng(seed).normal(size=(n, 4)))


def test_quat_matrix_roundtrip_up_to_sign():
    q = _rand_quats(500)
    q2 = matrix_to_quat(quat_to_matrix(q))
    dots = np.abs((q * q2).sum(-1))
    np.testing.assert_allclose(dots, 1.0, atol=1e-10)
    assert (q2[:, 0] >= 0).all()


def test_matrix_to_quat_near_180_degrees_is_stable():
    for axis in np.eye(3):
        q = np.r_[1e-9, axis]
        q = q / np.linalg.norm(q)
        m = quat_to_matrix(q)
        np.testing.assert_allclose(quat_to_matrix(matrix_to_quat(m)), m, atol=1e-9)


def test_multiply_matches_matrix_product_and_conjugate_inverts():
    a, b = _rand_quats(50, 1), _rand_quats(50, 2)
    np.testing.assert_allclose(quat_to_matrix(quat_multiply(a, b)), quat_to_matrix(a) @ quat_to_matrix(b), atol=1e-12)
    ident = quat_multiply(a, quat_conjugate(a))
    np.testing.assert_allclose(ident, np.tile([1.0, 0, 0, 0], (50, 1)), atol=1e-12)


def test_rotate_matches_matrix():
    q = _rand_quats(20, 3)
    v = np.random.default_rng(4).normal(size=(20, 3))
    np.testing.assert_allclose(quat_rotate(q, v), (quat_to_matrix(q) @ v[..., None])[..., 0], atol=1e-12)


def test_sixd_roundtrip_and_orthonormal():
    m = quat_to_matrix(_rand_quats(100, 5))
    np.testing.assert_allclose(sixd_to_matrix(matrix_to_sixd(m)), m, atol=1e-12)
    noisy = matrix_to_sixd(m) + np.random.default_rng(0).normal(size=(100, 6)) * 0.1
    r = sixd_to_matrix(noisy)
    np.testing.assert_allclose(r @ np.swapaxes(r, -1, -2), np.broadcast_to(np.eye(3), r.shape), atol=1e-12)
    np.testing.assert_allclose(np.linalg.det(r), 1.0, atol=1e-12)


def test_quat_between_including_opposite_vectors():
    rng = np.random.default_rng(6)
    a, b = rng.normal(size=(50, 3)), rng.normal(size=(50, 3))
    q = quat_between(a, b)
    r = quat_rotate(q, a / np.linalg.norm(a, axis=1, keepdims=True))
    np.testing.assert_allclose(r, b / np.linalg.norm(b, axis=1, keepdims=True), atol=1e-10)
    q = quat_between(np.array([0.0, 0, 1]), np.array([0.0, 0, -1]))
    np.testing.assert_allclose(quat_rotate(q, np.array([0.0, 0, 1])), [0, 0, -1], atol=1e-10)


def test_make_continuous_removes_sign_flips():
    q = _rand_quats(1, 7)[0]
    seq = np.stack([q, -q, q, -q])[:, None, :]
    out = quat_make_continuous(seq)
    assert ((out[1:] * out[:-1]).sum(-1) > 0).all()
    np.testing.assert_allclose(np.abs(out), np.abs(seq))


def test_torch_gradients_are_finite():
    q = torch.tensor(_rand_quats(10, 8), requires_grad=True)
    quat_to_matrix(q).sum().backward()
    assert torch.isfinite(q.grad).all()
