"""Signed-distance primitives of the generated body (pure numpy): ellipsoids, round cones (tapered capsules),
rounded boxes, smooth union / intersection, and ``_Prim``, one primitive placed in a local frame with the bone
it skins to. Part of the body generator (``core.body``) behind the key-vertex template (ReConForM §3.1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def _sd_ellipsoid(q, r):
    """Approximate signed distance of local points q (n,3) to an ellipsoid with radii r (3,)."""
    k0 = np.linalg.norm(q / r, axis=1)
    k1 = np.linalg.norm(q / (r * r), axis=1)
    return k0 * (k0 - 1.0) / np.maximum(k1, 1e-12)


def _sd_round_cone(q, length, r1, r2):
    """Exact signed distance to a round cone along local +Z from 0 (radius r1) to ``length`` (radius r2)."""
    b = np.array([0.0, 0.0, length])
    l2 = length * length
    rr = r1 - r2
    a2 = l2 - rr * rr
    il2 = 1.0 / l2
    y = q[:, 2] * length
    z = y - l2
    x2 = ((q * l2 - b[None] * y[:, None]) ** 2).sum(1)
    y2 = y * y * l2
    z2 = z * z * l2
    k = np.sign(rr) * rr * rr * x2
    out = (np.sqrt(np.maximum(x2 * a2 * il2, 0.0)) + y * rr) * il2 - r1
    c2 = np.sign(y) * a2 * y2 < k
    out = np.where(c2, np.sqrt(x2 + y2) * il2 - r1, out)
    c1 = np.sign(z) * a2 * z2 > k
    out = np.where(c1, np.sqrt(x2 + z2) * il2 - r2, out)
    return out


def _sd_round_box(q, half, r):
    d = np.abs(q) - half
    return np.linalg.norm(np.maximum(d, 0.0), axis=1) + np.minimum(d.max(1), 0.0) - r


def _smin(a, b, k):
    if k <= 0:
        return np.minimum(a, b)
    h = np.maximum(k - np.abs(a - b), 0.0) / k
    return np.minimum(a, b) - h * h * k * 0.25


def _smax(a, b, k):
    return -_smin(-a, -b, k)


def _frame(origin, z_axis, x_hint):
    """(4,4) world->local transform of a frame at ``origin`` with local Z along ``z_axis``."""
    z = np.asarray(z_axis, float)
    z = z / np.linalg.norm(z)
    x = np.asarray(x_hint, float) - z * (np.dot(x_hint, z))
    if np.linalg.norm(x) < 1e-8:
        x = np.cross(z, [0.0, 1.0, 0.0]) if abs(z[1]) < 0.9 else np.cross(z, [1.0, 0.0, 0.0])
    x = x / np.linalg.norm(x)
    y = np.cross(z, x)
    R = np.stack([x, y, z])  # rows: local axes
    M = np.eye(4)
    M[:3, :3] = R
    M[:3, 3] = -R @ np.asarray(origin, float)
    return M


@dataclass
class _Prim:
    """One implicit primitive: a shape in a local frame, the bone it skins to, how it blends."""

    kind: str                   # 'ellipsoid' | 'cone' | 'box'
    to_local: np.ndarray        # (4,4) world -> local
    params: tuple
    bone: str | None            # bone for skin weights (None: geometry only)
    blend: float = 0.0          # smooth-union radius with what came before
    geom: bool = True           # contributes to the surface
    scale: np.ndarray = field(default_factory=lambda: np.ones(3))  # local axis squash (x, y, z)
    ground: bool = False        # clipped by the plane z = ground_z (soles)
    ground_z: float = 0.0
    radius_bound: float = 0.0   # bounding radius around the local origin..end (for the grid bbox)
    anchor: tuple = ()          # world points covered by the bound

    def sdf(self, p):
        q = p @ self.to_local[:3, :3].T + self.to_local[:3, 3]
        s = self.scale
        if self.kind == "ellipsoid":
            d = _sd_ellipsoid(q, np.asarray(self.params[0]))
        elif self.kind == "cone":
            length, r1, r2 = self.params
            d = _sd_round_cone(q / s, length / s[2], r1, r2) * s.min()
        elif self.kind == "box":
            half, r = self.params
            d = _sd_round_box(q, np.asarray(half), r)
        else:  # pragma: no cover
            raise ValueError(self.kind)
        if self.ground:
            d = _smax(d, self.ground_z - p[:, 2], 0.004 * self.params_scale)
        return d

    params_scale: float = 1.0

    def bbox(self):
        pts = np.asarray(self.anchor)
        return pts.min(0) - self.radius_bound, pts.max(0) + self.radius_bound
