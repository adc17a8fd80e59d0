"""core.rig.rotations_np: the numpy twins agree with core.rig.rotations' torch functions (float64, 1e-12), Euler and
axis-angle conversions agree with products of single-axis rotations, and the module never imports torch."""

import pathlib
import subprocess
import sys

import numpy as np
import pytest
import torch

from core.rig import rotations as rt
from core.rig import rotations_np as rn

ROOT = pathlib.Path(__file__).resolve().parents[2]

ATOL = 1e-12


def _rng(seed):
    return np.random.default_rng(seed)


def _quats(shape, seed):
    return _rng(seed).normal(size=shape + (4,))


def _torch(fn, *arrays):
    """``fn`` on float64 tensors, back to numpy (the torch path, not the numpy delegation)."""
    return fn(*(torch.from_numpy(np.ascontiguousarray(a, np.float64)) for a in arrays)).numpy()


@pytest.mark.parametrize("shape", [(1,), (7,), (5, 3)])
def test_quaternion_twins_match_torch(shape):
    a, b = _quats(shape, 1), _quats(shape, 2)
    np.testing.assert_allclose(rn.quat_normalize(a), _torch(rt.quat_normalize, a), atol=ATOL, rtol=0)
    np.testing.assert_allclose(rn.quat_conjugate(a), _torch(rt.quat_conjugate, a), atol=ATOL, rtol=0)
    np.testing.assert_allclose(rn.quat_multiply(a, b), _torch(rt.quat_multiply, a, b), atol=ATOL, rtol=0)
    np.testing.assert_allclose(rn.quat_to_matrix(a), _torch(rt.quat_to_matrix, a), atol=ATOL, rtol=0)


@pytest.mark.parametrize("shape", [(1,), (200,), (4, 6)])
def test_matrix_to_quat_twin_matches_torch(shape):
    m = rn.quat_to_matrix(_quats(shape, 3))
    q = rn.matrix_to_quat(m)
    np.testing.assert_allclose(q, _torch(rt.matrix_to_quat, m), atol=ATOL, rtol=0)
    assert (q[..., 0] >= 0).all()
    np.testing.assert_allclose(rn.quat_to_matrix(q), m, atol=1e-12, rtol=0)


def test_matrix_to_quat_near_180_degrees_matches_torch():
    qs = np.array([np.r_[1e-9, axis] for axis in np.eye(3)] + [[1e-9, 0.6, 0.8, 0.0]])
    m = rn.quat_to_matrix(qs)
    np.testing.assert_allclose(rn.matrix_to_quat(m), _torch(rt.matrix_to_quat, m), atol=ATOL, rtol=0)


def test_torch_module_hands_numpy_to_the_twins():
    a, b = _quats((9,), 4), _quats((9,), 5)
    for name, args in (("quat_normalize", (a,)), ("quat_conjugate", (a,)), ("quat_multiply", (a, b)),
                       ("quat_to_matrix", (a,)), ("matrix_to_quat", (rn.quat_to_matrix(a),))):
        out = getattr(rt, name)(*args)
        assert isinstance(out, np.ndarray) and out.dtype == np.float64, name
        np.testing.assert_array_equal(out, getattr(rn, name)(*args))
    assert rt.quat_make_continuous is rn.quat_make_continuous


def _axis_matrix(axis, angle):
    c, s = np.cos(angle), np.sin(angle)
    i = "XYZ".index(axis)
    j, k = (i + 1) % 3, (i + 2) % 3
    m = np.eye(3)
    m[j, j], m[j, k], m[k, j], m[k, k] = c, -s, s, c
    return m


@pytest.mark.parametrize("order", rn.EULER_ORDERS)
def test_euler_to_quat_applies_the_axes_in_order(order):
    """Blender's 'XYZ' rotates about X first: R = Rz @ Ry @ Rx (and likewise for every order)."""
    angles = _rng(6).uniform(-np.pi, np.pi, size=(20, 3))
    q = rn.euler_to_quat(angles, order)
    for e, qi in zip(angles, q):
        r = np.eye(3)
        for axis in order:
            r = _axis_matrix(axis, e["XYZ".index(axis)]) @ r
        np.testing.assert_allclose(rn.quat_to_matrix(qi), r, atol=ATOL, rtol=0)
    with pytest.raises(ValueError, match="Euler order"):
        rn.euler_to_quat(angles, "XXY")


def test_axis_angle_to_quat():
    aa = np.concatenate([_rng(7).uniform(-np.pi, np.pi, (30, 1)), _rng(8).normal(size=(30, 3))], 1)
    q = rn.axis_angle_to_quat(aa)
    axis = aa[:, 1:] / np.linalg.norm(aa[:, 1:], axis=1, keepdims=True)
    np.testing.assert_allclose(q[:, 0], np.cos(aa[:, 0] / 2), atol=ATOL, rtol=0)
    np.testing.assert_allclose(q[:, 1:], axis * np.sin(aa[:, :1] / 2), atol=ATOL, rtol=0)
    np.testing.assert_array_equal(rn.axis_angle_to_quat([0.7, 0.0, 0.0, 0.0]), [1.0, 0.0, 0.0, 0.0])


def test_quat_make_continuous_flips_signs_only():
    q = rn.quat_normalize(_quats((12, 3), 9))
    c = rn.quat_make_continuous(q)
    assert ((c[1:] * c[:-1]).sum(-1) >= 0).all()
    np.testing.assert_allclose(np.abs((c * q).sum(-1)), 1.0, atol=ATOL)


def test_rotations_np_never_imports_torch():
    code = ("import sys\nsys.modules['torch'] = None\n"
            "import core.rig.rotations_np as rn\n"
            "rn.euler_to_quat([[0.1, 0.2, 0.3]], 'ZYX'); rn.matrix_to_quat(rn.quat_to_matrix([1.0, 0, 0, 0]))\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr
