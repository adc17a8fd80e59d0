"""Rotation conversions. Quaternions are WXYZ (Blender's order), matrices act on column vectors.

Every function takes torch tensors (any float dtype/device, any leading batch shape ``...``) and numpy arrays
too: numpy in, numpy out (computed in float64). Functions with a pure-numpy twin in ``core.rig.rotations_np``
hand numpy inputs to it; that module never imports torch, so the bridge reads motions with it directly.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from . import rotations_np
from .rotations_np import quat_make_continuous

__all__ = ["quat_normalize", "quat_conjugate", "quat_multiply", "quat_to_matrix", "matrix_to_quat", "sixd_to_matrix",
           "matrix_to_sixd", "quat_rotate", "quat_between", "quat_make_continuous", "rotation_angle_deg"]


def _numpy_compatible(fn=None, *, twin=None):
    """Let ``fn`` accept numpy arrays: numpy in, numpy out (float64).

    With ``twin`` (the ``core.rig.rotations_np`` function of the same name) numpy-only calls go there; otherwise
    the arrays become float64 tensors and the results are converted back.
    """
    if fn is None:
        return functools.partial(_numpy_compatible, twin=twin)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not any(isinstance(a, np.ndarray) for a in args):
            return fn(*args, **kwargs)
        if twin is not None and not any(isinstance(a, torch.Tensor) for a in args):
            return twin(*args, **kwargs)
        targs = [torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64)) if isinstance(a, np.ndarray) else a
                 for a in args]
        out = fn(*targs, **kwargs)
        return out.numpy() if isinstance(out, torch.Tensor) else out

    return wrapper


@_numpy_compatible(twin=rotations_np.quat_normalize)
def quat_normalize(q, eps: float = 1e-12):
    """(..., 4) -> (..., 4) unit quaternions."""
    return q / q.norm(dim=-1, keepdim=True).clamp_min(eps)


@_numpy_compatible(twin=rotations_np.quat_conjugate)
def quat_conjugate(q):
    """(..., 4) -> (..., 4); the inverse of a unit quaternion."""
    return q * q.new_tensor([1.0, -1.0, -1.0, -1.0])


@_numpy_compatible(twin=rotations_np.quat_multiply)
def quat_multiply(a, b):
    """Hamilton product ``a ⊗ b`` of (..., 4) WXYZ quaternions (apply b first, then a)."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack((
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ), dim=-1)


@_numpy_compatible(twin=rotations_np.quat_to_matrix)
def quat_to_matrix(q):
    """(..., 4) WXYZ (need not be unit) -> (..., 3, 3) rotation matrices."""
    q = quat_normalize(q)
    w, x, y, z = q.unbind(-1)
    return torch.stack((
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ), dim=-1).reshape(q.shape[:-1] + (3, 3))


@_numpy_compatible(twin=rotations_np.matrix_to_quat)
def matrix_to_quat(m):
    """(..., 3, 3) rotation matrices -> (..., 4) unit WXYZ quaternions with w >= 0.

    Uses the numerically stable branch per element (largest of the four candidate denominators).
    """
    m00, m01, m02 = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
    m10, m11, m12 = m[..., 1, 0], m[..., 1, 1], m[..., 1, 2]
    m20, m21, m22 = m[..., 2, 0], m[..., 2, 1], m[..., 2, 2]
    cands = torch.stack((
        torch.stack((1 + m00 + m11 + m22, m21 - m12, m02 - m20, m10 - m01), -1),
        torch.stack((m21 - m12, 1 + m00 - m11 - m22, m01 + m10, m02 + m20), -1),
        torch.stack((m02 - m20, m01 + m10, 1 - m00 + m11 - m22, m12 + m21), -1),
        torch.stack((m10 - m01, m02 + m20, m12 + m21, 1 - m00 - m11 + m22), -1),
    ), dim=-2)  # (..., 4, 4): row k is 4*q_k*q for the k-th candidate
    diag = torch.stack((cands[..., 0, 0], cands[..., 1, 1], cands[..., 2, 2], cands[..., 3, 3]), -1)
    best = diag.argmax(dim=-1, keepdim=True)
    row = torch.gather(cands, -2, best[..., None].expand(best.shape[:-1] + (1, 4))).squeeze(-2)
    q = row / (2.0 * torch.gather(diag, -1, best).clamp_min(1e-12).sqrt())
    q = quat_normalize(q)
    return torch.where(q[..., :1] < 0, -q, q)


@_numpy_compatible
def sixd_to_matrix(d6):
    """(..., 6) continuous 6D representation (Zhou et al. 2019; first two matrix *columns*) -> (..., 3, 3)."""
    a1, a2 = d6[..., :3], d6[..., 3:]
    b1 = a1 / a1.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    b2 = a2 - (b1 * a2).sum(-1, keepdim=True) * b1
    b2 = b2 / b2.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    b3 = torch.cross(b1, b2, dim=-1)
    return torch.stack((b1, b2, b3), dim=-1)


@_numpy_compatible
def matrix_to_sixd(m):
    """(..., 3, 3) -> (..., 6): the first two columns, concatenated."""
    return torch.cat((m[..., :, 0], m[..., :, 1]), dim=-1)


@_numpy_compatible
def quat_rotate(q, v):
    """Rotate (..., 3) vectors by (..., 4) unit quaternions."""
    qv = q[..., 1:]
    t = 2.0 * torch.cross(qv, v, dim=-1)
    return v + q[..., :1] * t + torch.cross(qv, t, dim=-1)


@_numpy_compatible
def quat_between(a, b):
    """(..., 3), (..., 3) -> (..., 4) shortest-arc unit quaternion rotating direction a onto direction b.

    For opposite vectors any axis perpendicular to ``a`` is used.
    """
    a = a / a.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    b = b / b.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    w = 1.0 + (a * b).sum(-1, keepdim=True)
    xyz = torch.cross(a, b, dim=-1)
    # Opposite vectors: pick an axis perpendicular to a.
    alt = torch.cross(a, a.new_tensor([1.0, 0.0, 0.0]).expand_as(a), dim=-1)
    alt2 = torch.cross(a, a.new_tensor([0.0, 1.0, 0.0]).expand_as(a), dim=-1)
    alt = torch.where(alt.norm(dim=-1, keepdim=True) < 1e-6, alt2, alt)
    opposite = w < 1e-9
    q = torch.where(opposite, torch.cat((torch.zeros_like(w), alt), -1), torch.cat((w, xyz), -1))
    return quat_normalize(q)


def rotation_angle_deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle in degrees between (..., 3) direction vectors."""
    a = a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), 1e-12)
    return np.degrees(np.arccos(np.clip((a * b).sum(-1), -1.0, 1.0)))
