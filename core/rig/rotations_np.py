"""Rotation conversions in plain numpy: the twins of ``core.rig.rotations`` that never import torch.

Quaternions are WXYZ (Blender's order), matrices act on column vectors, every function takes any leading
batch shape ``...`` and computes in float64. The bridge reads motions with these (reading a clip must not
import torch); ``core.rig.rotations`` hands numpy inputs to them, and tests/core/test_rotations_np.py checks each
one against its torch twin.
"""

from __future__ import annotations

import numpy as np

#: Blender's Euler orders (``PoseBone.rotation_mode`` other than QUATERNION / AXIS_ANGLE).
EULER_ORDERS = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def quat_normalize(q, eps: float = 1e-12) -> np.ndarray:
    """(..., 4) -> (..., 4) unit quaternions."""
    q = _f64(q)
    return q / np.maximum(np.linalg.norm(q, axis=-1, keepdims=True), eps)


def quat_conjugate(q) -> np.ndarray:
    """(..., 4) -> (..., 4); the inverse of a unit quaternion."""
    return _f64(q) * np.array([1.0, -1.0, -1.0, -1.0])


def quat_multiply(a, b) -> np.ndarray:
    """Hamilton product ``a ⊗ b`` of (..., 4) WXYZ quaternions (apply b first, then a)."""
    aw, ax, ay, az = np.moveaxis(_f64(a), -1, 0)
    bw, bx, by, bz = np.moveaxis(_f64(b), -1, 0)
    return np.stack((
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ), axis=-1)


def quat_to_matrix(q) -> np.ndarray:
    """(..., 4) WXYZ (need not be unit) -> (..., 3, 3) rotation matrices."""
    q = quat_normalize(q)
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack((
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ), axis=-1).reshape(q.shape[:-1] + (3, 3))


def matrix_to_quat(m) -> np.ndarray:
    """(..., 3, 3) rotation matrices -> (..., 4) unit WXYZ quaternions with w >= 0.

    Uses the numerically stable branch per element (largest of the four candidate denominators). Columns must
    be unit length: divide a scaled matrix by its column norms first.
    """
    m = _f64(m)
    m00, m01, m02 = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
    m10, m11, m12 = m[..., 1, 0], m[..., 1, 1], m[..., 1, 2]
    m20, m21, m22 = m[..., 2, 0], m[..., 2, 1], m[..., 2, 2]
    cands = np.stack((
        np.stack((1 + m00 + m11 + m22, m21 - m12, m02 - m20, m10 - m01), -1),
        np.stack((m21 - m12, 1 + m00 - m11 - m22, m01 + m10, m02 + m20), -1),
        np.stack((m02 - m20, m01 + m10, 1 - m00 + m11 - m22, m12 + m21), -1),
        np.stack((m10 - m01, m02 + m20, m12 + m21, 1 - m00 - m11 + m22), -1),
    ), axis=-2)  # (..., 4, 4): row k is 4*q_k*q for the k-th candidate
    diag = np.stack((cands[..., 0, 0], cands[..., 1, 1], cands[..., 2, 2], cands[..., 3, 3]), -1)
    best = np.argmax(diag, axis=-1)[..., None]
    row = np.take_along_axis(cands, best[..., None], axis=-2)[..., 0, :]
    q = row / (2.0 * np.sqrt(np.maximum(np.take_along_axis(diag, best, axis=-1), 1e-12)))
    q = quat_normalize(q)
    return np.where(q[..., :1] < 0, -q, q)


def euler_to_quat(euler, order: str = "XYZ") -> np.ndarray:
    """(..., 3) Euler angles (radians, x y z) in Blender's ``rotation_mode`` order -> (..., 4) WXYZ.

    The order names the axes in the order they apply: Blender's 'XYZ' rotates about X first, R = Rz @ Ry @ Rx.
    """
    if order not in EULER_ORDERS:
        raise ValueError(f"Unknown Euler order {order!r}: expected one of {', '.join(EULER_ORDERS)}.")
    euler = _f64(euler)
    q = np.zeros(euler.shape[:-1] + (4,))
    q[..., 0] = 1.0
    for axis_name in order:
        a = "XYZ".index(axis_name)
        half = euler[..., a] * 0.5
        qa = np.zeros_like(q)
        qa[..., 0] = np.cos(half)
        qa[..., 1 + a] = np.sin(half)
        q = quat_multiply(qa, q)
    return q


def axis_angle_to_quat(aa) -> np.ndarray:
    """(..., 4) Blender axis-angle (angle, x, y, z) -> (..., 4) WXYZ (a zero axis gives the identity)."""
    aa = _f64(aa)
    axis = aa[..., 1:]
    n = np.linalg.norm(axis, axis=-1, keepdims=True)
    ok = n[..., 0] > 1e-12
    half = aa[..., 0] * 0.5
    q = np.zeros(aa.shape)
    q[..., 0] = np.where(ok, np.cos(half), 1.0)
    q[..., 1:] = np.where(ok[..., None], axis / np.where(n > 1e-12, n, 1.0) * np.sin(half)[..., None], 0.0)
    return q


def quat_make_continuous(q, axis: int = 0) -> np.ndarray:
    """Flip signs along ``axis`` (time) so that consecutive quaternions have a non-negative dot product.

    q: (T, ..., 4) with time on ``axis``. Returns a new array; rotations are unchanged.
    """
    q = np.moveaxis(np.array(q, dtype=np.float64, copy=True), axis, 0)
    for t in range(1, len(q)):
        flip = (q[t] * q[t - 1]).sum(-1) < 0
        q[t][flip] *= -1
    return np.moveaxis(q, 0, axis)
