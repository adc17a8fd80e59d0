"""A ground object's surface -> a HeightField over the region a clip's feet can reach (ReConForM §6.2).

``GroundSurface`` is a ground object as the core receives it (its evaluated triangles in world space, read by
the bridge). ``sample_ground`` intersects vertical lines through a regular grid with every triangle
(``vertical_hits``: exact, what rays cast straight down return), keeps the top surface (below an optional
ceiling), fills holes from their neighbours and reports them, reports overhangs, and raises the samples beside
steep edges (``raise_edges``) so that the bilinear field never lies inside a step. docs/solver.md "Terrain"
has the measurements behind the defaults.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ...errors import CoreError
from .field import HeightField

#: default grid spacing (metres): measured, docs/solver.md "Terrain" (tools/experiments/terrain_resolution.py)
DEFAULT_SPACING = 0.02
#: the grid never holds more samples than this (2^22: 32 MB of float64 heights); a larger footprint gets a
#: coarser spacing, and the report says so
MAX_SAMPLES = 1 << 22
#: a rise steeper than this (rise / spacing, 63°) between neighbouring samples is an edge: ``raise_edges``
EDGE_SLOPE = 2.0
#: free space under an upper surface (metres) that counts as an overhang in the report
OVERHANG_CLEARANCE = 0.5
#: more holes than this share of the samples within the object's extent is an error (a mostly empty object:
#: edges, a sparse scatter); samples beyond its extent are not holes (``check_covers`` tests the path)
MAX_HOLE_SHARE = 0.5
#: (tri, grid point) pairs tested per chunk of the intersection (bounds its temporary memory, ~40 MB)
_PAIRS_PER_CHUNK = 1 << 20



@dataclass(frozen=True)
class GroundSurface:
    """A ground object as the core receives it: its evaluated triangles in world space, and how to sample it.

    Attributes:
        name: the object's name (every message and report names it).
        vertices: (V, 3) float64 world positions (metres, Z up).
        triangles: (F, 3) int64 vertex indices.
        spacing: grid spacing in metres (None: DEFAULT_SPACING).
        ceiling: world z above which surfaces are ignored (None: none; the top surface is the ground).
    """

    name: str
    vertices: np.ndarray
    triangles: np.ndarray
    spacing: float = None
    ceiling: float = None

    def __post_init__(self):
        v = np.asarray(self.vertices, dtype=np.float64)
        f = np.asarray(self.triangles, dtype=np.int64)
        if v.ndim != 2 or v.shape[1] != 3 or f.ndim != 2 or f.shape[1] != 3:
            raise CoreError(f"Ground '{self.name}': vertices must be (V, 3) and triangles (F, 3).")
        if not len(f):
            raise CoreError(f"Ground '{self.name}' has no faces: pick a mesh object with a surface to stand on.")
        if f.min() < 0 or f.max() >= len(v):
            raise CoreError(f"Ground '{self.name}': a triangle points at a vertex that does not exist.")
        if not np.isfinite(v).all():
            raise CoreError(f"Ground '{self.name}' has non-finite vertex positions.")
        if self.spacing is not None and not self.spacing > 0:
            raise CoreError(f"Ground '{self.name}': the grid spacing must be positive, not {self.spacing}.")
        object.__setattr__(self, "vertices", v)
        object.__setattr__(self, "triangles", f)

    @property
    def bounds(self) -> tuple:
        """(xmin, xmax, ymin, ymax, zmin, zmax) of the triangles' vertices."""
        p = self.vertices[np.unique(self.triangles)]
        lo, hi = p.min(0), p.max(0)
        return float(lo[0]), float(hi[0]), float(lo[1]), float(hi[1]), float(lo[2]), float(hi[2])


@dataclass(frozen=True)
class TerrainReport:
    """How a GroundSurface was sampled (the batch report and the panel show it).

    ``grid`` (nx, ny) samples every ``spacing`` metres from ``origin`` (x, y); ``capped``: the spacing was
    coarsened to stay within MAX_SAMPLES; ``holes``: samples within the object's outline seen from above (the convex
    hull of its vertices near the region) with no surface under them, ``beyond``: samples outside that outline
    (both filled from their neighbours), ``overhangs``: samples with at least OVERHANG_CLEARANCE of free space under the
    surface used; ``hole_frames``: frames on which a probe (copy-rotations' feet) lies over a hole; ``height_range``
    (min, max) of the field; ``seconds`` to build it; ``triangles``: those near the region; ``outside_frames``: frames
    of the result whose feet left the sampled region (filled in after the solve, -1 until then).
    """

    name: str
    grid: tuple
    spacing: float
    origin: tuple
    capped: bool
    holes: int
    beyond: int
    overhangs: int
    height_range: tuple
    seconds: float
    triangles: int
    hole_frames: int = 0
    outside_frames: int = -1

    @property
    def samples(self) -> int:
        return int(self.grid[0] * self.grid[1])

    def as_dict(self) -> dict:
        return {"object": self.name, "grid": list(self.grid), "spacing_m": self.spacing,
                "origin_m": list(self.origin), "extent_m": [(n - 1) * self.spacing for n in self.grid],
                "capped": self.capped, "holes": self.holes, "hole_share": self.holes / max(self.samples, 1),
                "beyond_edge": self.beyond,
                "hole_frames": self.hole_frames, "overhangs": self.overhangs,
                "height_range_m": list(self.height_range),
                "triangles_used": self.triangles, "build_s": self.seconds, "outside_frames": self.outside_frames}

    def line(self) -> str:
        """One line for the user: 'Stairs: 412 x 96 samples every 2 cm, 0 holes, 0 overhangs'."""
        s = (f"{self.name}: {self.grid[0]} x {self.grid[1]} samples every {100 * self.spacing:.3g} cm"
             + (" (coarsened to stay under the sample cap)" if self.capped else "")
             + f", {self.holes} holes" + (f", {self.beyond} beyond its edge" if self.beyond else "")
             + (f" (a foot over them on {self.hole_frames} frames)" if self.hole_frames else "")
             + f", {self.overhangs} overhangs")
        if self.outside_frames > 0:
            s += f"; feet beyond the sampled region on {self.outside_frames} frames"
        return s


def vertical_hits(vertices: np.ndarray, triangles: np.ndarray, xs: np.ndarray, ys: np.ndarray):
    """Every intersection of the vertical lines through the grid points (xs[i], ys[j]) with the triangles.

    Exact (barycentric interpolation in the triangle's xy projection; a point on a shared edge or vertex is
    counted by each triangle, to within 1e-9 of the triangle's size, so that no point falls between them);
    vertical triangles (zero area seen from above) have no hit. Args: vertices (V, 3), triangles (F, 3),
    xs (nx,) and ys (ny,) increasing and evenly spaced. Returns (cell (H,) int64 = i · ny + j, z (H,),
    up (H,) bool: the triangle faces up, counter-clockwise seen from above).
    """
    nx, ny = len(xs), len(ys)
    x0, y0 = float(xs[0]), float(ys[0])
    dx = float(xs[1] - xs[0]) if nx > 1 else 1.0
    dy = float(ys[1] - ys[0]) if ny > 1 else 1.0
    P = vertices[triangles]                                                  # (F, 3, 3)
    a, b, c = P[:, 0, :2], P[:, 1, :2], P[:, 2, :2]
    area2 = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])
    size2 = np.maximum(np.ptp(P[:, :, :2], axis=1).max(1), 1e-12) ** 2
    lo, hi = P[:, :, :2].min(1), P[:, :, :2].max(1)
    i0 = np.maximum(np.ceil((lo[:, 0] - x0) / dx - 1e-9), 0).astype(np.int64)
    i1 = np.minimum(np.floor((hi[:, 0] - x0) / dx + 1e-9), nx - 1).astype(np.int64)
    j0 = np.maximum(np.ceil((lo[:, 1] - y0) / dy - 1e-9), 0).astype(np.int64)
    j1 = np.minimum(np.floor((hi[:, 1] - y0) / dy + 1e-9), ny - 1).astype(np.int64)
    keep = (np.abs(area2) > 1e-12 * size2) & (i1 >= i0) & (j1 >= j0)
    tri = np.nonzero(keep)[0]
    # work items: (triangle, first row, rows) with at most _PAIRS_PER_CHUNK grid points each
    ncol = j1[tri] - j0[tri] + 1
    rows_per = np.maximum(_PAIRS_PER_CHUNK // ncol, 1)
    pieces = -(-(i1[tri] - i0[tri] + 1) // rows_per)
    w_tri = np.repeat(tri, pieces)
    w_first = i0[w_tri] + (np.arange(len(w_tri)) - np.repeat(np.cumsum(pieces) - pieces, pieces)) \
        * np.repeat(rows_per, pieces)
    w_rows = np.minimum(i1[w_tri] - w_first + 1, np.repeat(rows_per, pieces))
    w_cols = j1[w_tri] - j0[w_tri] + 1
    count = w_rows * w_cols
    cells, zs, ups = [], [], []
    start = 0
    ends = np.cumsum(count)
    while start < len(w_tri):
        stop = int(np.searchsorted(ends, (ends[start - 1] if start else 0) + _PAIRS_PER_CHUNK, side="right"))
        stop = max(stop, start + 1)
        k = np.arange(start, stop)
        n = count[k]
        item = np.repeat(k, n)
        local = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        t = w_tri[item]
        i = w_first[item] + local // w_cols[item]
        j = j0[t] + local % w_cols[item]
        px, py = x0 + i * dx, y0 + j * dy
        A, B, C = a[t], b[t], c[t]
        ar = area2[t]
        l_a = ((B[:, 0] - px) * (C[:, 1] - py) - (B[:, 1] - py) * (C[:, 0] - px)) / ar
        l_b = ((C[:, 0] - px) * (A[:, 1] - py) - (C[:, 1] - py) * (A[:, 0] - px)) / ar
        l_c = 1.0 - l_a - l_b
        inside = (l_a >= -1e-9) & (l_b >= -1e-9) & (l_c >= -1e-9)
        z = (l_a * P[t, 0, 2] + l_b * P[t, 1, 2] + l_c * P[t, 2, 2])[inside]
        cells.append((i * ny + j)[inside])
        zs.append(z)
        ups.append((ar > 0)[inside])
        start = stop
    if not cells:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0, bool)
    return np.concatenate(cells), np.concatenate(zs), np.concatenate(ups)


def _top_surface(cells, z, up, num_cells: int, ceiling=None):
    """(heights (num_cells,) NaN where no surface, overhang (num_cells,) bool) from ``vertical_hits``: the
    highest hit at or below ``ceiling``; an overhang where, going down from it, a downward-facing hit lies at
    least OVERHANG_CLEARANCE above the next upward-facing one (free space under a surface)."""
    if ceiling is not None:
        keep = z <= ceiling + 1e-9
        cells, z, up = cells[keep], z[keep], up[keep]
    top = np.full(num_cells, -np.inf)
    np.maximum.at(top, cells, z)
    over = np.zeros(num_cells, bool)
    if len(cells) > 1:
        order = np.lexsort((-z, cells))
        c, zz, uu = cells[order], z[order], up[order]
        gap = (c[:-1] == c[1:]) & ~uu[:-1] & uu[1:] & (zz[:-1] - zz[1:] >= OVERHANG_CLEARANCE)
        over[c[:-1][gap]] = True
    top[~np.isfinite(top)] = np.nan
    return top, over


def _fill_holes(H: np.ndarray) -> np.ndarray:
    """NaN samples of (nx, ny) filled from the nearest valid samples along x and y (both directions): linear
    interpolation across a gap, the border's height beyond the object's edge; inverse-distance weighted, one
    pass over the grid whatever the holes' size."""
    valid = ~np.isnan(H)
    num = np.zeros_like(H)
    den = np.zeros_like(H)
    for axis in (0, 1):
        n = H.shape[axis]
        idx = np.arange(n).reshape((-1, 1) if axis == 0 else (1, -1))
        for flip in (False, True):
            v = np.flip(valid, axis) if flip else valid
            h = np.flip(H, axis) if flip else H
            last = np.maximum.accumulate(np.where(v, idx, -1), axis=axis)          # nearest valid behind
            found = last >= 0
            val = np.take_along_axis(h, np.maximum(last, 0), axis=axis)
            w = np.where(found, 1.0 / np.maximum(idx - last, 1), 0.0)
            if flip:
                val, w = np.flip(val, axis), np.flip(w, axis)
            num += np.where(w > 0, w * np.nan_to_num(val), 0.0)
            den += w
    return np.where(valid, H, num / np.maximum(den, 1e-300))


def raise_edges(H: np.ndarray, jump: float) -> np.ndarray:
    """Samples of (nx, ny) with a neighbour (3 × 3) more than ``jump`` higher take that neighbour's height.

    Bilinear interpolation smears a step's edge over the cell that holds it: between the last sample of the
    lower tread and the first of the upper one, the field ramps up, and the half of that cell beyond the edge
    lies *under* the step. Raising the lower tread's last sample moves the ramp onto the lower side, so the
    field lies on or above the mesh at every edge steeper than ``jump`` per cell (a riser, a curb, a wall);
    ramps and hills (gentler) keep their exact samples.
    """
    P = np.pad(H, 1, mode="edge")
    top = H.copy()
    for di in (0, 1, 2):
        for dj in (0, 1, 2):
            np.maximum(top, P[di:di + H.shape[0], dj:dj + H.shape[1]], out=top)
    return np.where(top - H > jump, top, H)


def grid_spacing(region, spacing: float, max_samples: int = MAX_SAMPLES) -> tuple:
    """(spacing, capped): ``spacing``, or the smallest one that keeps ``region`` (xmin, xmax, ymin, ymax)
    within ``max_samples`` samples."""
    w, h = region[1] - region[0], region[3] - region[2]
    s = float(spacing)
    capped = False
    while (math.floor(w / s) + 2) * (math.floor(h / s) + 2) > max_samples:
        s = max(s * 1.05, math.sqrt(w * h / max_samples))
        capped = True
    return s, capped


def sample_ground(surface: GroundSurface, region, dilate: bool = True, max_samples: int = MAX_SAMPLES,
                  probes: np.ndarray = None) -> tuple:
    """A HeightField of ``surface`` over ``region`` (xmin, xmax, ymin, ymax), and its TerrainReport.

    Samples every ``surface.spacing`` (DEFAULT_SPACING) metres, coarser when the region would need more than
    ``max_samples``; keeps the top surface below ``surface.ceiling``; fills holes (and samples beyond the
    object's edge) from their neighbours (more than MAX_HOLE_SHARE of them is an error naming the object);
    ``dilate``: raise the samples beside steep
    edges (``raise_edges``); ``probes`` (T, P, 2): points per frame (the feet) whose frames over a hole the
    report counts.
    """
    t0 = time.perf_counter()
    xmin, xmax, ymin, ymax = (float(v) for v in region)
    if not (xmax > xmin and ymax > ymin):
        raise CoreError(f"Ground '{surface.name}': the region to sample is empty.")
    s, capped = grid_spacing(region, surface.spacing or DEFAULT_SPACING, max_samples)
    nx, ny = int(math.ceil((xmax - xmin) / s)) + 1, int(math.ceil((ymax - ymin) / s)) + 1
    xs, ys = xmin + s * np.arange(nx), ymin + s * np.arange(ny)
    v, f = surface.vertices, surface.triangles
    near = np.ones(len(f), bool)                                  # cull triangles beside the region first
    for axis, lo_, hi_ in ((0, xmin - s, xs[-1] + s), (1, ymin - s, ys[-1] + s)):
        c = v[:, axis]
        a, b, d = c[f[:, 0]], c[f[:, 1]], c[f[:, 2]]
        near &= (np.maximum(np.maximum(a, b), d) >= lo_) & (np.minimum(np.minimum(a, b), d) <= hi_)
    cells, z, up = vertical_hits(v, f[near], xs, ys)
    top, over = _top_surface(cells, z, up, nx * ny, surface.ceiling)
    H = top.reshape(nx, ny)
    missing = np.isnan(H)
    inside = _outline_mask(v[np.unique(f[near])][:, :2] if near.any() else v[:, :2], xs, ys)
    holes, beyond = int((missing & inside).sum()), int((missing & ~inside).sum())
    if missing.all():
        raise CoreError(f"Ground '{surface.name}' has no surface under the clip's footprint (x {xmin:.2f} to "
                        f"{xmax:.2f} m, y {ymin:.2f} to {ymax:.2f} m"
                        + (f", below the ceiling z = {surface.ceiling:g} m" if surface.ceiling is not None else "")
                        + "): move it under the target or pick another object.")
    if holes > MAX_HOLE_SHARE * max(int(inside.sum()), 1):
        raise CoreError(f"Ground '{surface.name}' has a surface under only {100 * (1 - holes / inside.sum()):.0f} % "
                        f"of its extent within the clip's footprint (x {xmin:.2f} to {xmax:.2f} m, y {ymin:.2f} to "
                        f"{ymax:.2f} m): give it faces there, or pick another object.")
    hole_frames = 0
    if missing.any() and probes is not None:
        p = np.asarray(probes, dtype=np.float64)
        i = np.clip(np.round((p[..., 0] - xmin) / s).astype(np.int64), 0, nx - 1)
        j = np.clip(np.round((p[..., 1] - ymin) / s).astype(np.int64), 0, ny - 1)
        hole_frames = int(missing[i, j].reshape(len(p), -1).any(1).sum())
    if missing.any():
        H = _fill_holes(H)
    if dilate:
        H = raise_edges(H, EDGE_SLOPE * s)
    report = TerrainReport(surface.name, (nx, ny), s, (xmin, ymin), capped, holes, beyond, int(over.sum()),
                           (float(H.min()), float(H.max())), time.perf_counter() - t0, int(near.sum()), hole_frames)
    return HeightField((xmin, ymin), (s, s), H, name=surface.name, report=report), report


def _convex_hull(p: np.ndarray) -> np.ndarray:
    """(H, 2) counter-clockwise convex hull of 2D points ``p`` (N, 2) (Andrew's monotone chain)."""
    p = np.unique(np.round(p, 9), axis=0)
    if len(p) < 3:
        return p

    def turn(o, a, b) -> float:
        """z of (a − o) × (b − o): > 0 for a left turn (numpy 2 deprecates np.cross on 2-vectors)."""
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    def half(points):
        out = []
        for q in points:
            while len(out) >= 2 and turn(out[-2], out[-1], q) <= 0:
                out.pop()
            out.append(q)
        return out
    lower, upper = half(p), half(p[::-1])
    return np.asarray(lower[:-1] + upper[:-1])


def _hull_candidates(p: np.ndarray, bins: int = 1024) -> np.ndarray:
    """The points of ``p`` (N, 2) that can be on its convex hull, at most 2 per band of y (``bins`` bands): the
    leftmost and the rightmost of each band (the hull of a million-vertex terrain from a few thousand points)."""
    if len(p) <= 2 * bins:
        return p
    lo, hi = p[:, 1].min(), p[:, 1].max()
    band = np.minimum(((p[:, 1] - lo) / max(hi - lo, 1e-12) * bins).astype(np.int64), bins - 1)
    order = np.lexsort((p[:, 0], band))
    first = np.unique(band[order], return_index=True)[1]
    last = np.r_[first[1:], len(order)] - 1
    return p[np.unique(np.r_[order[first], order[last]])]


def _outline_mask(points_xy: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """(nx, ny) bool: grid samples inside the object's outline seen from above, the convex hull of its
    vertices ``points_xy`` (N, 2) (its x / y bounds when the hull is degenerate). A ground turned off the world
    axes thus gets no false holes in the corners of its bounding box; a gap inside its outline stays a hole."""
    eps = 1e-9
    hull = _convex_hull(_hull_candidates(points_xy))
    lo, hi = points_xy.min(0), points_xy.max(0)
    if len(hull) < 3:
        return (((xs >= lo[0] - eps) & (xs <= hi[0] + eps))[:, None]
                & ((ys >= lo[1] - eps) & (ys <= hi[1] + eps))[None])
    a, b = hull, np.roll(hull, -1, axis=0)                                    # edges a -> b
    y = ys[:, None]
    crosses = (np.minimum(a[:, 1], b[:, 1]) - eps <= y) & (y <= np.maximum(a[:, 1], b[:, 1]) + eps)
    dy = b[:, 1] - a[:, 1]
    t = np.where(np.abs(dy) > eps, (y - a[:, 1]) / np.where(np.abs(dy) > eps, dy, 1.0), 0.0)
    x = a[:, 0] + np.clip(t, 0.0, 1.0) * (b[:, 0] - a[:, 0])                  # (ny, H)
    flat = np.abs(dy) <= eps                                                  # a horizontal edge: both ends
    xl = np.minimum(np.where(crosses, x, np.inf).min(1),
                    np.where(crosses & flat, np.minimum(a[:, 0], b[:, 0]), np.inf).min(1))
    xr = np.maximum(np.where(crosses, x, -np.inf).max(1),
                    np.where(crosses & flat, np.maximum(a[:, 0], b[:, 0]), -np.inf).max(1))
    return (xs[:, None] >= xl[None] - eps) & (xs[:, None] <= xr[None] + eps)


def clip_footprint(points_xy: np.ndarray, margin: float) -> tuple:
    """(xmin, xmax, ymin, ymax): the bounding box of world points ``points_xy`` (..., 2) grown by ``margin``."""
    p = np.asarray(points_xy, dtype=np.float64).reshape(-1, 2)
    lo, hi = p.min(0) - margin, p.max(0) + margin
    return float(lo[0]), float(hi[0]), float(lo[1]), float(hi[1])


def check_covers(surface: GroundSurface, path_xy: np.ndarray, tol: float = 0.0):
    """Raise a CoreError naming the ground when the path ``path_xy`` (T, 2) leaves the object's extent seen
    from above (its x / y bounds grown by ``tol``)."""
    x0, x1, y0, y1 = surface.bounds[:4]
    p = np.asarray(path_xy, dtype=np.float64).reshape(-1, 2)
    out = (p[:, 0] < x0 - tol) | (p[:, 0] > x1 + tol) | (p[:, 1] < y0 - tol) | (p[:, 1] > y1 + tol)
    if out.any():
        lo, hi = p.min(0), p.max(0)
        raise CoreError(f"Ground '{surface.name}' does not cover the clip's footprint: the target's hips travel "
                        f"over x {lo[0]:.2f} to {hi[0]:.2f} m, y {lo[1]:.2f} to {hi[1]:.2f} m, the object spans "
                        f"x {x0:.2f} to {x1:.2f} m, y {y0:.2f} to {y1:.2f} m ({int(out.sum())} of {len(p)} frames "
                        "outside): extend it, move it under the target, or move the target onto it.")
