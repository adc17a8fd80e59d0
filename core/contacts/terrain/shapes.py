"""Procedural grounds for the demo scene, the bench and the tests: stairs, a ramp, bumpy ground.

Each returns a ``GroundSurface`` laid along a walking direction: ``start`` (x, y) is where the approach
begins, ``direction`` the horizontal direction of travel, ``width`` the extent across it (centred). Distances
along the direction are ``s``; ``height_at(s)`` of each profile gives the analytic height the tests compare
the sampled field with.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .sampling import GroundSurface


class Ground(NamedTuple):
    """A procedural ground: its surface and its analytic height as a function of (x, y) (numpy, vectorised)."""

    surface: GroundSurface
    height: object


def _frame(start, direction):
    d = np.asarray(direction, dtype=np.float64)
    d = d / np.linalg.norm(d)
    return np.asarray(start, dtype=np.float64), d, np.array([-d[1], d[0]])


def _facing_up(V: np.ndarray, F: np.ndarray) -> np.ndarray:
    """Triangles (F, 3) reordered to face up (counter-clockwise seen from above) where they have an area in xy."""
    P = V[F]
    area2 = ((P[:, 1, 0] - P[:, 0, 0]) * (P[:, 2, 1] - P[:, 0, 1])
             - (P[:, 1, 1] - P[:, 0, 1]) * (P[:, 2, 0] - P[:, 0, 0]))
    F = F.copy()
    F[area2 < 0] = F[area2 < 0][:, ::-1]
    return F


def profile_surface(name: str, profile: np.ndarray, start, direction, width: float) -> GroundSurface:
    """A surface swept across ``width`` from a profile (K, 2) of (s, z) points (s non-decreasing; equal s for
    a vertical riser): one strip of two triangles per profile segment, facing up."""
    o, d, n = _frame(start, direction)
    prof = np.asarray(profile, dtype=np.float64)
    K = len(prof)
    verts = []
    for side in (-0.5, 0.5):
        xy = o + prof[:, :1] * d + side * width * n
        verts.append(np.concatenate([xy, prof[:, 1:]], 1))
    V = np.concatenate(verts)                                                  # (2K, 3): left row, right row
    k = np.arange(K - 1)
    a, b, c, e = k, k + 1, K + k + 1, K + k          # left s, left s+1, right s+1, right s
    F = np.concatenate([np.stack([a, e, c], 1), np.stack([a, c, b], 1)])
    return GroundSurface(name, V, _facing_up(V, F))


def _along(start, direction, x, y):
    o, d, _ = _frame(start, direction)
    return (np.asarray(x) - o[0]) * d[0] + (np.asarray(y) - o[1]) * d[1]


def stairs(start=(0.0, 0.0), direction=(0.0, -1.0), width=2.0, approach=1.0, steps=8, tread=0.3, rise=0.17,
           landing=3.0, steps_down=0, name="Stairs") -> Ground:
    """Flat approach, ``steps`` steps up (``tread`` deep, ``rise`` high), a flat landing ``landing`` long, then
    ``steps_down`` steps down and another ``landing`` of flat ground."""
    prof = [(0.0, 0.0), (approach, 0.0)]
    for i in range(steps):
        s = approach + i * tread
        prof += [(s, (i + 1) * rise), (s + tread, (i + 1) * rise)]
    top = approach + steps * tread + landing
    prof += [(top, steps * rise)]
    for i in range(steps_down):
        s = top + i * tread
        prof += [(s, (steps - i - 1) * rise), (s + tread, (steps - i - 1) * rise)]
    if steps_down:
        prof += [(top + steps_down * tread + landing, (steps - steps_down) * rise)]

    def height(x, y):
        s = _along(start, direction, x, y)
        up = np.clip(np.floor((s - approach) / tread) + 1, 0, steps)
        down = np.clip(np.floor((s - top) / tread) + 1, 0, steps_down)
        return (up - down) * rise
    return Ground(profile_surface(name, np.asarray(prof), start, direction, width), height)


def ramp(start=(0.0, 0.0), direction=(0.0, -1.0), width=2.0, approach=1.0, length=2.5, angle_deg=15.0,
         landing=3.0, name="Ramp") -> Ground:
    """Flat approach, a ramp of ``angle_deg`` over ``length`` metres (horizontal), flat landing."""
    top = length * np.tan(np.radians(angle_deg))
    prof = np.array([(0.0, 0.0), (approach, 0.0), (approach + length, top), (approach + length + landing, top)])

    def height(x, y):
        s = _along(start, direction, x, y)
        return np.clip(s - approach, 0.0, length) * np.tan(np.radians(angle_deg))
    return Ground(profile_surface(name, prof, start, direction, width), height)


def bumps(start=(0.0, 0.0), direction=(0.0, -1.0), width=2.0, length=7.0, amplitude=0.04, wavelength=0.7,
          spacing=0.025, name="Bumps") -> Ground:
    """Rough ground: z = amplitude · sin(2π s / λ) · cos(2π c / (1.3 λ)) + amplitude / 2 · sin(2π (s + c) /
    (0.45 λ)) over ``length`` × ``width``, triangulated every ``spacing`` metres (the mesh is the truth between
    its vertices: ``height`` is the smooth function it samples)."""
    o, d, n = _frame(start, direction)

    def fn(s, c):
        return (amplitude * np.sin(2 * np.pi * s / wavelength) * np.cos(2 * np.pi * c / (1.3 * wavelength))
                + 0.5 * amplitude * np.sin(2 * np.pi * (s + c) / (0.45 * wavelength)))
    ns, nc = int(np.ceil(length / spacing)) + 1, int(np.ceil(width / spacing)) + 1
    S, C = np.meshgrid(np.linspace(0, length, ns), np.linspace(-width / 2, width / 2, nc), indexing="ij")
    xy = o + S[..., None] * d + C[..., None] * n
    V = np.concatenate([xy, fn(S, C)[..., None]], -1).reshape(-1, 3)
    idx = np.arange(ns * nc).reshape(ns, nc)
    a, b, c, e = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
    F = _facing_up(V, np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, e], 1)]))

    def height(x, y):
        x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
        s = (x - o[0]) * d[0] + (y - o[1]) * d[1]
        c = (x - o[0]) * n[0] + (y - o[1]) * n[1]
        return fn(s, c)
    return Ground(GroundSurface(name, V, F), height)
