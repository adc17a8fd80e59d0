"""The residual's B-spline grids in time (ReConForM §4.2's variables, ``parametrisation``): the uniform cubic
basis, the general one on any knot vector (Cox–de Boor), the grid refined around the source feet's events, and
``Band``, a basis by the non-zero entries of its rows, with its spline and its least-squares fit (docs/solver.md
"Knots", "Knots at the feet's events", "The upper body's knots")."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

#: frames: the shortest span ``event_knots`` makes (at 30 fps the 0.1 s spans are 3 frames and stay whole)
MIN_EVENT_SPAN = 3.0


class Band(NamedTuple):
    """A (T, C) B-spline basis by the non-zero entries of its rows (at most 4 for a cubic spline): ``cols`` (T, K)
    their control indices, in column order, ``vals`` (T, K) their weights, ``num_controls`` C. K = 1 with unit
    weights is the identity (one control point per frame)."""

    cols: np.ndarray
    vals: np.ndarray
    num_controls: int

    def dense(self) -> np.ndarray:
        """(T, C) the basis."""
        B = np.zeros((len(self.cols), self.num_controls))
        np.put_along_axis(B, self.cols, self.vals, 1)
        return B

    def controls(self, frames: np.ndarray) -> np.ndarray:
        """(C,) bool: the control points that shape any of ``frames`` ((T,) bool)."""
        out = np.zeros(self.num_controls, dtype=bool)
        out[self.cols[frames][self.vals[frames] != 0]] = True
        return out

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """(T, K) the spline of control points ``x`` (C, K) (``banded_spline`` on this grid)."""
        return banded_spline(self.tensors(x.dtype, x.device), x)

    def fitter(self):
        """A function (T, K) values -> (C, K) the control points whose spline fits them best (least squares,
        float64 on the CPU): the normal equations BᵀB x = Bᵀy, BᵀB (C, C) summed from the rows' non-zero entries
        and factorised once (a dense pseudo-inverse of a long clip's basis takes tens of seconds). A control
        point that shapes no frame (an end of the grid) gets 0, as from the pseudo-inverse (a unit diagonal
        there, where its row and right-hand side are 0)."""
        C, K = self.num_controls, self.cols.shape[1]
        if K == 1:                                   # the identity: a control point per frame
            return lambda y: y.clone()
        gram = np.zeros((C, C))
        for i in range(K):
            for j in range(K):
                np.add.at(gram, (self.cols[:, i], self.cols[:, j]), self.vals[:, i] * self.vals[:, j])
        idle = np.flatnonzero(np.diag(gram) == 0.0)
        gram[idle, idle] = 1.0
        factor = torch.linalg.cholesky(torch.as_tensor(gram))
        cols, vals = torch.as_tensor(self.cols), torch.as_tensor(self.vals)

        def fit(y: torch.Tensor) -> torch.Tensor:
            rhs = y.new_zeros((C, y.shape[1]))
            for m in range(K):
                rhs.index_add_(0, cols[:, m], vals[:, m:m + 1] * y)
            return torch.cholesky_solve(rhs, factor)
        return fit

    def tensors(self, dtype, device):
        """((K, T) control indices, (T, K) weights) as tensors for ``Parametrisation.spline``; None for the
        identity."""
        if self.cols.shape[1] == 1:
            return None
        return (torch.as_tensor(self.cols.T.copy(), device=device),
                torch.as_tensor(self.vals, dtype=dtype, device=device))


def banded_spline(band, ctrl: torch.Tensor) -> torch.Tensor:
    """(C, K) control points -> (T, K) per-frame values on a grid given as ``Band.tensors``' ((k, T) control
    indices, (T, k) weights): a gather per non-zero weight of a row; None, the identity: ``ctrl`` itself."""
    if band is None:
        return ctrl
    idx, w = band
    out = w[:, 0:1] * ctrl.index_select(0, idx[0])
    for m in range(1, idx.shape[0]):
        out = out + w[:, m:m + 1] * ctrl.index_select(0, idx[m])
    return out


def uniform_band(num_frames: int, spacing: float) -> Band:
    """The uniform cubic B-spline basis with control points every ``spacing`` frames (the identity if <= 1), as
    a Band (no (T, C) matrix is built: a long clip's is hundreds of MB)."""
    T = num_frames
    if spacing <= 1.0 or T < 4:
        return Band(np.arange(T)[:, None], np.ones((T, 1)), T)
    u = np.arange(T) / spacing
    last = int(np.floor((T - 1) / spacing))
    seg = np.minimum(np.floor(u).astype(np.int64), last)
    s = u - seg
    b = np.stack([(1 - s) ** 3, 3 * s ** 3 - 6 * s ** 2 + 4, -3 * s ** 3 + 3 * s ** 2 + 3 * s + 1, s ** 3], 1) / 6
    return Band(seg[:, None] + np.arange(4), b, last + 4)


def bspline_basis(num_frames: int, spacing: float) -> np.ndarray:
    """(T, C) uniform cubic B-spline basis with control points every ``spacing`` frames (identity if <= 1).

    Row t holds the weights of the 4 control points that shape frame t; rows sum to 1.
    """
    return uniform_band(num_frames, spacing).dense()


def band_of(basis: np.ndarray) -> Band:
    """The Band of a (T, C) B-spline ``basis`` (its 4 non-zero entries per row; the identity's one)."""
    T, C = basis.shape
    if T == C and np.array_equal(basis, np.eye(T)):
        return Band(np.arange(T)[:, None], np.ones((T, 1)), T)
    cols = np.argsort(basis == 0, axis=1, kind="stable")[:, :4]
    cols.sort(axis=1)
    return Band(cols, np.take_along_axis(basis, cols, 1), C)


def knot_basis(num_frames: int, knots: np.ndarray) -> np.ndarray:
    """(T, C) cubic B-spline basis on the knot vector ``knots`` (C + 4,) in frames, non-decreasing, strictly
    increasing over the frames (``knots[3] <= 0`` and ``knots[C] > T − 1``): row t holds the weights of the (at
    most) 4 control points that shape frame t (Cox–de Boor, The NURBS Book A2.2); rows sum to 1."""
    return knot_band(num_frames, knots).dense()


def knot_band(num_frames: int, knots: np.ndarray) -> Band:
    """``knot_basis`` as a Band (no (T, C) matrix built)."""
    U = np.asarray(knots, dtype=np.float64)
    C = len(U) - 4
    u = np.arange(num_frames, dtype=np.float64)
    span = np.clip(np.searchsorted(U, u, side="right") - 1, 3, C - 1)        # U[span] <= u < U[span + 1]
    N = np.zeros((num_frames, 4))
    N[:, 0] = 1.0
    left, right = np.zeros((num_frames, 4)), np.zeros((num_frames, 4))
    for j in range(1, 4):
        left[:, j] = u - U[span + 1 - j]
        right[:, j] = U[span + j] - u
        saved = np.zeros(num_frames)
        for r in range(j):
            temp = N[:, r] / (right[:, r + 1] + left[:, j - r])
            N[:, r] = saved + right[:, r + 1] * temp
            saved = left[:, j - r] * temp
        N[:, j] = saved
    return Band(span[:, None] - 3 + np.arange(4), N, C)


def refined_knots(num_frames: int, spacing: float, events, min_span: float) -> np.ndarray:
    """(C + 4,) knots in frames: a uniform grid every ``spacing`` frames (``bspline_basis``'s), whose spans within
    one span of an ``events`` frame are halved where a half is at least ``min_span`` frames; the grid is extended
    by three knots at each end, spaced like the span next to them."""
    K = int(np.floor((num_frames - 1) / spacing)) + 1
    grid = np.arange(K + 1) * float(spacing)                                 # breakpoints 0 .. ≥ T − 1
    ev = np.unique(np.asarray(events, dtype=np.int64)).astype(np.float64)
    mids = np.zeros(0)
    if len(ev) and spacing / 2 >= min_span:
        # span k = [grid[k], grid[k + 1]] is halved when an event lies in [grid[k] − spacing, grid[k + 1] + spacing)
        first = np.searchsorted(ev, grid[:-1] - spacing, side="left")                 # (K,) first event at or after
        near = ev[np.minimum(first, len(ev) - 1)] < grid[1:] + spacing
        mids = 0.5 * (grid[:-1] + grid[1:])[(first < len(ev)) & near]
    inner = np.sort(np.concatenate([grid, mids]))
    first, last = inner[1] - inner[0], inner[-1] - inner[-2]
    return np.concatenate([inner[0] - first * np.arange(3, 0, -1), inner, inner[-1] + last * np.arange(1, 4)])


__all__ = ["MIN_EVENT_SPAN", "Band", "band_of", "banded_spline", "bspline_basis", "knot_band", "knot_basis",
           "refined_knots", "uniform_band"]
