"""The target's ground (ReConForM §6.2, non-flat ground): a differentiable height field ``z = f(x, y)``.

Blender is Z up. The target stands on world z = 0 unless a terrain is given; the method replaces every height
``z`` by ``z − f(x, y)`` in M_height (hence W_floor and L_height) and in the foot terms. ``HeightField`` is a
regular grid interpolated bilinearly (differentiable in x and y); ``ground_height`` evaluates any ground the
core accepts: a level, one level per frame, or a height field.
"""

from __future__ import annotations

import numpy as np
import torch

from .errors import CoreError


class HeightField:
    """A differentiable terrain ``z = f(x, y)``: bilinear interpolation of a regular grid (world metres).

    Args:
        origin: (x0, y0) of grid sample [0, 0].
        spacing: (dx, dy) between samples.
        heights: (nx, ny) terrain height at ``(x0 + a dx, y0 + b dy)``.
    Outside the grid the border value is used (clamped).
    """

    def __init__(self, origin, spacing, heights):
        self.origin = tuple(float(v) for v in origin)
        self.spacing = tuple(float(v) for v in spacing)
        self.heights = np.asarray(heights, dtype=np.float64)
        if self.heights.ndim != 2 or min(self.heights.shape) < 2:
            raise CoreError("Terrain height field must be a grid of at least 2 x 2 samples.")
        if min(self.spacing) <= 0:
            raise CoreError("Terrain height field spacing must be positive.")

    @classmethod
    def from_function(cls, fn, x_range, y_range, resolution=64):
        """Sample ``fn(x, y) -> z`` (numpy, vectorised) on a resolution × resolution grid."""
        xs = np.linspace(*x_range, resolution)
        ys = np.linspace(*y_range, resolution)
        X, Y = np.meshgrid(xs, ys, indexing="ij")
        return cls((xs[0], ys[0]), (xs[1] - xs[0], ys[1] - ys[0]), fn(X, Y))

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Terrain height under (x, y), same shape as x; differentiable in x and y."""
        H = torch.as_tensor(self.heights, dtype=x.dtype, device=x.device)
        nx, ny = H.shape
        u = ((x - self.origin[0]) / self.spacing[0]).clamp(0, nx - 1)
        v = ((y - self.origin[1]) / self.spacing[1]).clamp(0, ny - 1)
        u0 = u.detach().floor().clamp(max=nx - 2).long()
        v0 = v.detach().floor().clamp(max=ny - 2).long()
        fu, fv = u - u0, v - v0
        h00, h10 = H[u0, v0], H[u0 + 1, v0]
        h01, h11 = H[u0, v0 + 1], H[u0 + 1, v0 + 1]
        return (h00 * (1 - fu) * (1 - fv) + h10 * fu * (1 - fv) + h01 * (1 - fu) * fv + h11 * fu * fv)


def ground_height(ground, x: torch.Tensor, y: torch.Tensor, frames=None) -> torch.Tensor:
    """Ground height under world (x, y), shaped like ``x`` (B, ...) where axis 0 runs over clip frames.

    ground: a level (float, metres), a (T,) array of levels per frame (``frames`` picks the rows of the clip
    that axis 0 of ``x`` covers: a slice or index array; all of them by default), or a callable ``f(x, y)``
    (a HeightField).
    """
    if callable(ground):
        return ground(x, y)
    g = np.asarray(ground, dtype=np.float64)
    if g.ndim == 0:
        return torch.full_like(x, float(g))
    g = torch.as_tensor(g if frames is None else g[frames], dtype=x.dtype, device=x.device)
    return g.reshape((-1,) + (1,) * (x.dim() - 1)).expand_as(x)
