"""The solver's variables (ReConForM §4.2: the target's joint rotations and root position over the whole clip),
parametrised as a smooth residual on the copy-rotations motion.

- Rotations: per optimised bone, a 6D residual δ added to the identity's 6D form, composed with the initial
  rotation: ``R(t) = R_init(t) · M(I₆ + δ(t))`` (``rotations.sixd_to_matrix``: continuous, no singularity).
- Hips: a world-space offset of the hips head in units of the target's height h_tgt, mapped to the hips' basis
  location by the per-frame inverse Jacobian of that map (its parents' rotations and rest frame).
- Both are cubic B-splines in time (``bspline_basis``): control points every ``knot_spacing`` seconds, spans
  halved around the source feet's events (``refined_knots``), 4 non-zero weights per frame (a banded matmul), so
  the residual cannot add high-frequency jitter. The bones that carry the head and the shoulders (``fine``) have
  their own, finer uniform grid (``fine_spacing``, never under 3 frames): on a 120 fps capture they can take out
  the frame-level jitter copy-rotations carries there (docs/solver.md "The upper body's knots").
"""

from __future__ import annotations

import copy
from typing import NamedTuple

import numpy as np
import torch

from ..affine import inv
from ..errors import CoreError
from ..rotations import matrix_to_quat, quat_make_continuous, quat_to_matrix, sixd_to_matrix
from ..types import Motion

IDENTITY_6D = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)
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

    def tensors(self, dtype, device):
        """((K, T) control indices, (T, K) weights) as tensors for ``Parametrisation.spline``; None for the
        identity."""
        if self.cols.shape[1] == 1:
            return None
        return (torch.as_tensor(self.cols.T.copy(), device=device),
                torch.as_tensor(self.vals, dtype=dtype, device=device))


def uniform_band(num_frames: int, spacing: float) -> Band:
    """The uniform cubic B-spline basis with control points every ``spacing`` frames (the identity if <= 1), as
    a Band (no (T, C) matrix is built: a long clip's is tens of MB)."""
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
    B = np.zeros((num_frames, C))
    rows = np.arange(num_frames)
    for m in range(4):
        B[rows, span - 3 + m] = N[:, m]
    return B


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


#: canonical bones on the upper body's finer grid (``upper_body_bones``)
UPPER_BODY_BONES = ("neck", "head", "left_shoulder", "right_shoulder")
#: the optimised bone the neck hangs from takes that grid too (its rotation moves the neck and shoulder joints)
NECK_PARENT = True


def upper_body_bones(skeleton, opt_idx, canonical: dict) -> np.ndarray:
    """(Jo,) bool over the optimised bones ``opt_idx``: those whose residual takes the upper body's finer grid
    (``SolverSettings.upper_knots``): the neck, head and collarbones (``UPPER_BODY_BONES``; ``canonical``: bone
    index -> canonical name) and, with ``NECK_PARENT``, the optimised bone nearest above the neck (or the head,
    without a neck; never the hips): the bones whose rotations move the head and the shoulder joints
    (docs/solver.md "The upper body's knots")."""
    parents = skeleton.parents
    opt = [int(j) for j in opt_idx]
    out = np.asarray([canonical.get(j) in UPPER_BODY_BONES for j in opt], dtype=bool)
    names = {c: j for j, c in canonical.items()}
    j = names.get("neck", names.get("head"))
    if j is not None and NECK_PARENT:
        j = parents[j]
        while j >= 0 and j not in opt:
            j = parents[j]
        if j >= 0 and canonical.get(j) != "hips":
            out[opt.index(j)] = True
    return out


def root_jacobian_inverse(skeleton, root_idx: int, init_motion: Motion, h_tgt: float) -> np.ndarray:
    """(T, 3, 3) map from a world-space offset of bone ``root_idx``'s head, in units of ``h_tgt``, to its basis
    location, per frame of ``init_motion`` (its ancestors' rotations, which the solver does not change there)."""
    T = init_motion.num_frames
    p = skeleton.parents[root_idx]
    A = skeleton.object_matrix[:3, :3]
    rest_rot = skeleton.rest_local[root_idx, :3, :3]
    if p < 0:
        Jm = np.broadcast_to(A @ rest_rot, (T, 3, 3))
    else:
        chain = []
        while p >= 0:   # the hips' ancestors, root first; only their rotations matter
            chain.insert(0, p)
            p = skeleton.parents[p]
        Gp = np.broadcast_to(np.eye(3), (T, 3, 3))
        for a in chain:
            Ra = quat_to_matrix(np.asarray(init_motion.rotations[:, a], dtype=np.float64))
            Gp = Gp @ skeleton.rest_local[a, :3, :3] @ Ra
        Jm = A @ Gp @ rest_rot
    return inv(Jm) * h_tgt


#: alternating projections of a warm start's rotation fit (each one linear least-squares solve)
REFIT_ITERATIONS = 10


def refit_rotations(ctrl: torch.Tensor, basis: torch.Tensor, pinv: torch.Tensor, rel: torch.Tensor) -> torch.Tensor:
    """6D residual control points (C, Jo, 6) whose B-spline (``basis`` (T, C), its pseudo-inverse ``pinv``), made
    orthonormal, reproduces the rotations ``rel`` (T, Jo, 3, 3) (float64), starting from ``ctrl``.

    A least-squares fit of the 6D values of ``rel`` (its first two columns, the start) is exact only where the
    solve's own 6D vectors stayed orthonormal; a solve that bent a joint far (a toe through 60°) leaves vectors
    of other lengths and angles, and the orthonormal frame of the fitted spline then misses ``rel`` by up to tens
    of degrees: a warm start (a re-solve, the next Live window) would begin away from the result it starts
    from. Gram-Schmidt ignores the first vector's length and the second's part along the first, so each
    iteration keeps those (as the current spline has them), puts the directions of ``rel`` into them, and fits
    the spline to that again (alternating projections)."""
    identity = torch.as_tensor(IDENTITY_6D, dtype=torch.float64)
    c1, c2 = rel[..., :, 0].double(), rel[..., :, 1].double()
    basis, pinv = basis.double(), pinv.double()
    C, Jo = ctrl.shape[:2]
    T = rel.shape[0]
    x = ctrl.double()
    for _ in range(REFIT_ITERATIONS):
        d6 = identity + (basis @ x.reshape(C, Jo * 6)).reshape(T, Jo, 6)
        a1, a2 = d6[..., :3], d6[..., 3:]
        along = (a2 * c1).sum(-1, keepdim=True)
        across = (a2 - along * c1).norm(dim=-1, keepdim=True)
        target = torch.cat((a1.norm(dim=-1, keepdim=True) * c1, along * c1 + across * c2), -1) - identity
        x = (pinv @ target.reshape(T, Jo * 6)).reshape(C, Jo, 6)
    return x


class Parametrisation:
    """The solver's variables and their map to per-frame pose channels.

    Args:
        R_init: (T, Jo, 3, 3) initial basis rotations of the optimised bones.
        rest_rot: (Jo, 3, 3) their rest rotations relative to their parents.
        root_loc_init: (T, 3) initial basis location of the hips.
        root_jac_inv: (T, 3, 3) world offset (units of h_tgt) -> hips basis location (``root_jacobian_inverse``).
        h_tgt: the target's height (metres).
        fps, knot_spacing: frame rate, seconds between control points (0: one per frame).
        events, event_span: frames (the source feet's ``FootModel.events``) whose spans are halved, where a half
            keeps at least ``event_span`` seconds (``refined_knots``; 0: a uniform grid).
        fine, fine_spacing: (Jo,) bool, the bones whose residual has its own uniform grid of ``fine_spacing``
            seconds (at least ``MIN_EVENT_SPAN`` frames); used where that is under 3/4 of ``knot_spacing``.
    Attributes:
        delta: (C, Jo_c, 6) 6D residual control points of the bones on the main grid (all Jo without a fine grid);
            root_off: (C, 3) hips offset control points (units of h_tgt); delta_fine: (C_f, Jo_f, 6) those of the
            ``fine`` bones, or None; leaf tensors with ``requires_grad`` (``params``: [delta, root_off] then
            delta_fine if any).
        groups: [(bone columns (Jo_g,), its grid's ``Band``)] of the rotation control tensors, in ``params``'
            order (the first on ``basis``, the main grid, which the hips' offset takes too).
        num_controls: C.
    """

    def __init__(self, R_init, rest_rot, root_loc_init, root_jac_inv, h_tgt: float, fps: float,
                 knot_spacing: float, events=(), event_span: float = 0.0, fine=None, fine_spacing: float = 0.0):
        dt, dev = R_init.dtype, R_init.device
        T, Jo = R_init.shape[:2]
        self.T, self.h_tgt = T, float(h_tgt)
        self.R_init = R_init
        self.RR = (rest_rot[:, None] @ R_init.transpose(0, 1)).contiguous()      # (Jo, T, 3, 3) rest · basis
        self.root_loc_init = root_loc_init
        self.root_jac_inv = root_jac_inv
        self.identity6 = torch.as_tensor(IDENTITY_6D, dtype=dt, device=dev)
        spacing = knot_spacing * fps
        knots = None
        if len(events) and event_span > 0 and spacing > 1.0 and T >= 4:
            knots = refined_knots(T, spacing, events, max(event_span * fps, MIN_EVENT_SPAN))
            if np.diff(knots).min() > 0.75 * spacing:          # no span halved: the uniform basis, as without events
                knots = None
        # one dense (T, C) basis built: a long clip's is tens of MB
        basis = bspline_basis(T, spacing) if knots is None else knot_basis(T, knots)
        self.basis = basis
        self.num_controls = basis.shape[1]
        main = band_of(basis)
        self.band = main.tensors(dt, dev)
        fine = np.zeros(Jo, dtype=bool) if fine is None else np.asarray(fine, dtype=bool)
        fine_frames = max(fine_spacing * fps, MIN_EVENT_SPAN)
        if not (fine.any() and fine_spacing > 0 and fine_frames < 0.75 * spacing and T >= 4):
            fine[:] = False
        self.groups = [(np.flatnonzero(~fine), main)]
        self.fine_band = None
        self.perm = None
        if fine.any():
            fine_band = uniform_band(T, fine_frames)
            self.groups.append((np.flatnonzero(fine), fine_band))
            self.fine_band = fine_band.tensors(dt, dev)
            # (Jo,) the bones' columns in [main grid's, fine grid's] order
            self.perm = torch.as_tensor(np.argsort(np.concatenate([g[0] for g in self.groups])), device=dev)
        self.delta = torch.zeros((self.num_controls, len(self.groups[0][0]), 6), dtype=dt, device=dev)
        self.root_off = torch.zeros((self.num_controls, 3), dtype=dt, device=dev)
        self.delta_fine = None if self.perm is None else torch.zeros(
            (self.groups[1][1].num_controls, len(self.groups[1][0]), 6), dtype=dt, device=dev)

    def copy(self) -> "Parametrisation":
        """The same parametrisation with its own copy of the control points (constants shared)."""
        out = copy.copy(self)
        out.delta = self.delta.detach().clone()
        out.root_off = self.root_off.detach().clone()
        out.delta_fine = None if self.delta_fine is None else self.delta_fine.detach().clone()
        return out

    def require_grad(self):
        for t in self.params:
            t.requires_grad_(True)

    @property
    def params(self) -> list:
        """The control tensors: [delta, root_off], then delta_fine where the fine bones have their own grid."""
        return [self.delta, self.root_off] + ([] if self.delta_fine is None else [self.delta_fine])

    @property
    def rotation_params(self) -> list:
        """The rotation control tensors, one per ``groups`` entry."""
        return [self.delta] + ([] if self.delta_fine is None else [self.delta_fine])

    def rates(self, rot, root) -> list:
        """Learning rates in ``params``' order: ``rot`` for each rotation control tensor, ``root`` for the hips'."""
        return [rot, root] + [rot] * (len(self.params) - 2)

    def zero_residuals(self):
        """Per-frame residuals that reproduce the initial motion: ((T, Jo, 6), (T, 3)) zeros."""
        d = self.delta
        return (torch.zeros((self.T, self.RR.shape[0], 6), dtype=d.dtype, device=d.device),
                torch.zeros((self.T, 3), dtype=d.dtype, device=d.device))

    def spline(self, ctrl: torch.Tensor, band=False) -> torch.Tensor:
        """(C, K) control points -> (T, K) per-frame values (banded B-spline: 4 controls per frame), on the main
        grid or on ``band`` (``Band.tensors``')."""
        band = self.band if band is False else band
        if band is None:
            return ctrl
        idx, w = band
        out = w[:, 0:1] * ctrl.index_select(0, idx[0])
        for m in range(1, 4):
            out = out + w[:, m:m + 1] * ctrl.index_select(0, idx[m])
        return out

    def frame_residuals(self):
        """Per-frame 6D residuals (T, Jo, 6) and root offsets (T, 3) from the control points."""
        return self.residuals(*self.params)

    def residuals(self, delta: torch.Tensor, root_off: torch.Tensor, delta_fine: torch.Tensor = None):
        """Per-frame 6D residuals (T, Jo, 6) and root offsets (T, 3) from control points ``delta`` (C, Jo_c, 6),
        ``root_off`` (C, 3) and ``delta_fine`` (C_f, Jo_f, 6) (the variables' shapes, ``params``' order)."""
        C, Jo = delta.shape[:2]
        d = self.spline(delta.reshape(C, Jo * 6)).reshape(-1, Jo, 6)
        if delta_fine is not None:
            Cf, Jf = delta_fine.shape[:2]
            d_fine = self.spline(delta_fine.reshape(Cf, Jf * 6), self.fine_band).reshape(-1, Jf, 6)
            d = torch.cat((d, d_fine), 1).index_select(1, self.perm)
        return d, self.spline(root_off)

    def root_location(self, off: torch.Tensor) -> torch.Tensor:
        """(T, 3) hips basis location for root offsets ``off`` (T, 3) (units of h_tgt)."""
        return self.root_loc_init + (self.root_jac_inv @ off[..., None])[..., 0]

    def rotations(self, d: torch.Tensor) -> torch.Tensor:
        """(T, Jo, 3, 3) basis rotations of the optimised bones for per-frame residuals ``d`` (T, Jo, 6)."""
        return self.R_init @ sixd_to_matrix(self.identity6 + d)

    def local_rotations(self, d: torch.Tensor) -> torch.Tensor:
        """(Jo, T, 3, 3) local rotations (rest · basis), bone-major, for residuals ``d`` (T, Jo, 6)."""
        return self.RR @ sixd_to_matrix(self.identity6 + d.transpose(0, 1))

    def fit_to(self, R: torch.Tensor, dloc: torch.Tensor, sixd=None):
        """Set the control points to the least-squares fit of a motion (a warm start): ``R`` (T, Jo, 3, 3) basis
        rotations of the optimised bones, ``dloc`` (T, 3) change of the hips basis location from the initial
        motion (float64). ``sixd``: (T, Jo, 6) the 6D vectors the solve that made the motion had on those
        frames (``sixd_frames``, NaN on frames it did not solve), fitted as they are where given: the fit is
        then exact on the same frames, whatever the vectors' lengths (``refit_rotations`` for the rest)."""
        Ri = self.R_init.double().cpu()
        rel = Ri.transpose(-1, -2) @ R.double().cpu()
        d6 = torch.cat((rel[..., :, 0], rel[..., :, 1]), dim=-1) - torch.as_tensor(IDENTITY_6D, dtype=torch.float64)
        if sixd is not None:
            given = torch.as_tensor(np.asarray(sixd, dtype=np.float64)) - torch.as_tensor(IDENTITY_6D,
                                                                                         dtype=torch.float64)
            if given.shape != d6.shape:
                raise CoreError(f"The warm start's 6D rotations have shape {tuple(given.shape)}, not "
                                f"{tuple(d6.shape)}: they belong to another solve.")
            d6 = torch.where(torch.isfinite(given), given, d6)
        dloc = dloc.double().cpu()
        off = torch.linalg.solve(self.root_jac_inv.double().cpu(), dloc[..., None])[..., 0]
        dt, dev = self.delta.dtype, self.delta.device
        fitted = []
        for cols, band in self.groups:        # each bone group on its own grid
            basis = torch.as_tensor(band.dense())
            pinv = torch.linalg.pinv(basis)
            d6g, relg = d6[:, cols], rel[:, cols]
            ctrl = (pinv @ d6g.reshape(d6g.shape[0], -1)).reshape(-1, *d6g.shape[1:])
            fitted.append(refit_rotations(ctrl, basis, pinv, relg).to(dt).to(dev))
        self.delta = fitted[0]
        self.delta_fine = fitted[1] if len(fitted) > 1 else None
        pinv = torch.linalg.pinv(torch.as_tensor(self.basis))
        self.root_off = (pinv @ off).to(dt).to(dev).contiguous()

    def sixd_frames(self) -> np.ndarray:
        """(T, Jo, 6) float64: the 6D vectors (identity + residual, before Gram-Schmidt) of every frame."""
        with torch.no_grad():
            d, _ = self.frame_residuals()
            return (self.identity6 + d).double().cpu().numpy()

    def set_root_xy(self, offset: torch.Tensor):
        """Horizontal root offsets ``offset`` (T, 2) in metres -> the root controls' x, y (weighted average
        of the frames each control shapes: a quasi-interpolation)."""
        with torch.no_grad():
            if self.band is None:
                ctrl = offset
            else:
                idx, bw = self.band
                num = torch.zeros((self.num_controls, 2), dtype=offset.dtype, device=offset.device)
                den = torch.zeros((self.num_controls, 1), dtype=offset.dtype, device=offset.device)
                for m in range(4):
                    num.index_add_(0, idx[m], bw[:, m:m + 1] * offset)
                    den.index_add_(0, idx[m], bw[:, m:m + 1])
                ctrl = num / den.clamp_min(1e-9)
            self.root_off[:, :2] = ctrl / self.h_tgt

    def motion(self, init_motion: Motion, opt_idx: np.ndarray, root_idx: int) -> Motion:
        """The init motion with the optimised bones' rotations and the hips location replaced by the current
        variables' (sign-continuous WXYZ; the sign at frame 0 is the initial one)."""
        with torch.no_grad():
            d, off = self.frame_residuals()
            R, loc = self.rotations(d), self.root_location(off)
        rot = init_motion.rotations.copy()
        q = matrix_to_quat(R.double()).cpu().numpy()   # (T, Jo, 4)
        flip0 = (q[0] * rot[0, opt_idx]).sum(-1) < 0
        q[:, flip0] *= -1
        rot[:, opt_idx] = quat_make_continuous(q, axis=0)
        out_loc = init_motion.locations.copy()
        out_loc[:, root_idx] = loc.double().cpu().numpy()
        return Motion(rot, out_loc, init_motion.fps, init_motion.frame_start)
