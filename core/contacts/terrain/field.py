"""The target's ground as a differentiable height field ``z = f(x, y)`` (ReConForM §6.2): ``HeightField``
(a regular grid interpolated bilinearly, differentiable in x and y) and ``ground_height`` (any ground the core
accepts: a level, one level per frame, or a height field)."""

from __future__ import annotations

import numpy as np
import torch

from ...errors import CoreError


class HeightField:
    """A differentiable terrain ``z = f(x, y)``: bilinear interpolation of a regular grid (world metres).

    Args:
        origin: (x0, y0) of grid sample [0, 0].
        spacing: (dx, dy) between samples.
        heights: (nx, ny) terrain height at ``(x0 + a dx, y0 + b dy)``.
        name: what it was sampled from (a ground object's name), for reports.
        report: how it was sampled (``sampling.TerrainReport``), or None.
    Outside the grid the border value is used (clamped).
    """

    def __init__(self, origin, spacing, heights, name: str = "", report=None):
        self.origin = tuple(float(v) for v in origin)
        self.spacing = tuple(float(v) for v in spacing)
        self.heights = np.asarray(heights, dtype=np.float64)
        self.name = name
        self.report = report
        if self.heights.ndim != 2 or min(self.heights.shape) < 2:
            raise CoreError("Terrain height field must be a grid of at least 2 x 2 samples.")
        if min(self.spacing) <= 0:
            raise CoreError("Terrain height field spacing must be positive.")
        if not np.isfinite(self.heights).all():
            raise CoreError("Terrain height field has non-finite heights: fill its holes first.")
        self._tensors = {}

    @classmethod
    def from_function(cls, fn, x_range, y_range, resolution=64):
        """Sample ``fn(x, y) -> z`` (numpy, vectorised) on a resolution × resolution grid."""
        xs = np.linspace(*x_range, resolution)
        ys = np.linspace(*y_range, resolution)
        X, Y = np.meshgrid(xs, ys, indexing="ij")
        return cls((xs[0], ys[0]), (xs[1] - xs[0], ys[1] - ys[0]), fn(X, Y))

    @property
    def shape(self) -> tuple:
        return self.heights.shape

    @property
    def bounds(self) -> tuple:
        """(xmin, xmax, ymin, ymax) of the sampled region."""
        nx, ny = self.heights.shape
        return (self.origin[0], self.origin[0] + (nx - 1) * self.spacing[0],
                self.origin[1], self.origin[1] + (ny - 1) * self.spacing[1])

    def _grid(self, dtype, device) -> torch.Tensor:
        key = (dtype, str(device))
        if key not in self._tensors:   # converted once per dtype and device, not at every solver step
            self._tensors[key] = torch.as_tensor(self.heights, dtype=dtype, device=device)
        return self._tensors[key]

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Terrain height under (x, y), same shape as x; differentiable in x and y."""
        H = self._grid(x.dtype, x.device)
        nx, ny = H.shape
        u = ((x - self.origin[0]) / self.spacing[0]).clamp(0, nx - 1)
        v = ((y - self.origin[1]) / self.spacing[1]).clamp(0, ny - 1)
        u0 = u.detach().floor().clamp(max=nx - 2).long()
        v0 = v.detach().floor().clamp(max=ny - 2).long()
        fu, fv = u - u0, v - v0
        h00, h10 = H[u0, v0], H[u0 + 1, v0]
        h01, h11 = H[u0, v0 + 1], H[u0 + 1, v0 + 1]
        return (h00 * (1 - fu) * (1 - fv) + h10 * fu * (1 - fv) + h01 * (1 - fu) * fv + h11 * fu * fv)

    def at(self, xy: np.ndarray) -> np.ndarray:
        """Heights (...,) under world points ``xy`` (..., 2), numpy float64."""
        xy = np.asarray(xy, dtype=np.float64)
        with torch.no_grad():
            return self(torch.as_tensor(xy[..., 0]), torch.as_tensor(xy[..., 1])).numpy()

    def outside(self, xy: np.ndarray, tol: float = 1e-9) -> np.ndarray:
        """(...,) bool: points ``xy`` (..., 2) beyond the sampled region (where the border height is used)."""
        x0, x1, y0, y1 = self.bounds
        xy = np.asarray(xy, dtype=np.float64)
        return ((xy[..., 0] < x0 - tol) | (xy[..., 0] > x1 + tol) | (xy[..., 1] < y0 - tol)
                | (xy[..., 1] > y1 + tol))

    def frames_outside(self, track) -> int:
        """Frames of a clip (its ``core.character.track.ClipTrack``) where a foot vertex lies beyond the sampled region."""
        out = np.zeros(track.num_frames, bool)
        for p in track.foot_points:
            if p.shape[1]:
                out |= self.outside(p[..., :2]).any(-1)
        return int(out.sum())


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
