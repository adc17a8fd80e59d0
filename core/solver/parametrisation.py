"""The solver's variables (ReConForM §4.2: the target's joint rotations and root position over the whole clip),
parametrised as a smooth residual on the copy-rotations motion.

- Rotations: per optimised bone, a 6D residual δ added to the identity's 6D form, composed with the initial
  rotation: ``R(t) = R_init(t) · M(I₆ + δ(t))`` (``rotations.sixd_to_matrix``: continuous, no singularity).
- Hips: a world-space offset of the hips head in units of the target's height h_tgt, mapped to the hips' basis
  location by the per-frame inverse Jacobian of that map (its parents' rotations and rest frame).
- Both are cubic B-splines in time (``knots``): control points every KNOT_SPACING seconds, spans
  halved around the source feet's events (``refined_knots``), 4 non-zero weights per frame (a banded matmul), so
  the residual cannot add high-frequency jitter. The bones that carry the head and the shoulders (``fine``) have
  their own, finer uniform grid (``fine_spacing``, never under 3 frames): on a 120 fps capture they can take out
  the frame-level jitter copy-rotations carries there (docs/solver.md "The upper body's knots").
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from ..rig.affine import inv
from ..errors import CoreError
from ..rig.rotations import matrix_to_quat, quat_make_continuous, quat_to_matrix, sixd_to_matrix
from ..types import Motion
from .knots import MIN_EVENT_SPAN, Band, banded_spline, knot_band, refined_knots, uniform_band

IDENTITY_6D = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)

#: seconds between the B-spline control points of the residual (0: one per frame; docs/solver.md "Knots")
KNOT_SPACING = 0.1
#: around the source feet's events (landing, lift-off, a lock's start and end) the knot spans are halved where a
#: half keeps at least this many seconds (0: a uniform grid; docs/solver.md "Knots at the feet's events")
EVENT_KNOTS = 0.05
#: seconds between the control points of the upper body's own grid (``upper_body_bones``; never under 3 frames:
#: at 30 fps the main grid's, so nothing changes; on a 120 fps capture it takes out the jitter copy-rotations
#: carries there; 0: the main grid; docs/solver.md "The upper body's knots")
UPPER_KNOTS = 0.025
#: the fingers optimised too (False: they keep copy-rotations' rotations; no finger key vertex needs them)
OPTIMISE_FINGERS = False


#: canonical bones on the upper body's finer grid (``upper_body_bones``)
UPPER_BODY_BONES = ("neck", "head", "left_shoulder", "right_shoulder")
#: which optimised bones the neck hangs from take that grid too: "spine" every one up to the hips (their rotations
#: move the neck and the shoulder joints, and carry a capture's trunk jitter out to the hands), "nearest" only the
#: one nearest above the neck, "" none; never the hips (docs/solver.md "The upper body's knots")
NECK_CHAIN = "spine"


def upper_body_bones(skeleton, opt_idx, canonical: dict) -> np.ndarray:
    """(Jo,) bool over the optimised bones ``opt_idx``: those whose residual takes the upper body's finer grid
    (UPPER_KNOTS): the neck, head and collarbones (``UPPER_BODY_BONES``; ``canonical``: bone
    index -> canonical name) and, as ``NECK_CHAIN`` says, the optimised bones above the neck (or the head, without
    a neck) up to the hips, never the hips nor the skeleton's root: the bones whose rotations move the head and the
    shoulder joints (docs/solver.md "The upper body's knots")."""
    if NECK_CHAIN not in ("spine", "nearest", ""):
        raise CoreError(f"NECK_CHAIN must be 'spine', 'nearest' or '', not '{NECK_CHAIN}'.")
    parents = skeleton.parents
    opt = [int(j) for j in opt_idx]
    out = np.asarray([canonical.get(j) in UPPER_BODY_BONES for j in opt], dtype=bool)
    names = {c: j for j, c in canonical.items()}
    j = names.get("neck", names.get("head"))
    if j is None or not NECK_CHAIN:
        return out
    j = parents[j]
    while j >= 0 and parents[j] >= 0 and canonical.get(j) != "hips":
        if j in opt:
            out[opt.index(j)] = True
            if NECK_CHAIN == "nearest":
                break
        j = parents[j]
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


def refit_rotations(ctrl: torch.Tensor, band: Band, fit, rel: torch.Tensor) -> torch.Tensor:
    """6D residual control points (C, Jo, 6) whose B-spline (on ``band``; ``fit``: its ``Band.fitter``), made
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
    C, Jo = ctrl.shape[:2]
    T = rel.shape[0]
    x = ctrl.double()
    weights = band.tensors(x.dtype, x.device)                 # the grid's rows as tensors, once for every iteration
    for _ in range(REFIT_ITERATIONS):
        d6 = identity + banded_spline(weights, x.reshape(C, Jo * 6)).reshape(T, Jo, 6)
        a1, a2 = d6[..., :3], d6[..., 3:]
        along = (a2 * c1).sum(-1, keepdim=True)
        across = (a2 - along * c1).norm(dim=-1, keepdim=True)
        target = torch.cat((a1.norm(dim=-1, keepdim=True) * c1, along * c1 + across * c2), -1) - identity
        x = fit(target.reshape(T, Jo * 6)).reshape(C, Jo, 6)
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
        # each frame's weights, never the (T, C) matrix: a long clip's is hundreds of MB
        main = uniform_band(T, spacing) if knots is None else knot_band(T, knots)
        self.num_controls = main.num_controls
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

    @property
    def basis(self) -> np.ndarray:
        """(T, C) the main grid's basis (built on request: a long clip's is hundreds of MB)."""
        return self.groups[0][1].dense()

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
        return banded_spline(self.band if band is False else band, ctrl)

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
        for g, (cols, band) in enumerate(self.groups):        # each bone group on its own grid
            fit = band.fitter()
            if g == 0:                                           # the hips' offset: on the main grid
                self.root_off = fit(off).to(dt).to(dev).contiguous()
            d6g, relg = d6[:, cols], rel[:, cols]
            ctrl = fit(d6g.reshape(d6g.shape[0], -1)).reshape(-1, *d6g.shape[1:])
            fitted.append(refit_rotations(ctrl, band, fit, relg).to(dt).to(dev))
        self.delta = fitted[0]
        self.delta_fine = fitted[1] if len(fitted) > 1 else None

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
