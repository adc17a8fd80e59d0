"""Where the solve starts on a terrain (ReConForM §6.2; docs/solver.md "Terrain").

Copy-rotations walks at the flat height of the terrain under its first footstep, so on stairs its planted feet
sink ever deeper and L_reg, which keeps the key vertices near the start, would hold them there. The solve
therefore starts from copy-rotations *put onto* the terrain:

- ``terrain_lift``: per frame, how far each foot must rise so that its sole stands on the terrain under it
  (Δ_k: its highest-standing sole point on the surface), and how far the hips rise (the lowest planted foot's
  Δ: the stance legs never need to stretch), both smoothed in time;
- ``onto_terrain``: the motion with the hips raised by that lift and each leg bent by two-bone IK so that its
  foot reaches its own Δ (the foot keeps its world orientation; the knee stays in its bending plane).
"""

from __future__ import annotations

import numpy as np
import torch

from ..rig.affine import inv
from ..rig.kinematics import ForwardKinematics
from ..rig.rotations import matrix_to_quat, quat_between, quat_to_matrix
from ..types import Character, Motion
from .parametrisation import root_jacobian_inverse

#: the hips' lift: smoothed by a Gaussian of this width (seconds), from below the lowest planted foot's rise
#: (``smooth_below``) or across it (docs/solver.md "Terrain" has the measurements)
HIPS_SMOOTH_S, HIPS_BELOW = 0.1, True
#: a foot counts as planted for the hips' lift where its source contact weight exceeds this
PLANTED = 0.5
#: a planted foot may move along its long axis by up to FOOTING_REACH × h_c so that at most FOOTING_OVERHANG of
#: its points hang more than FOOTING_FLAT × h_c below its highest-standing one (``_footing_offset``);
#: candidate shifts every FOOTING_STEP metres
FOOTING_REACH, FOOTING_OVERHANG, FOOTING_FLAT, FOOTING_STEP = 0.1, 0.25, 0.003, 0.005
#: a leg bent by less than this (metres, knee off the hip-ankle line) bends towards the toes in the IK
KNEE_BLEND = 0.02


def smooth_in_time(x: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian smoothing of (T, ...) along axis 0 (``sigma`` frames; ends held)."""
    if sigma < 0.5 or len(x) < 2:
        return x
    r = int(np.ceil(3 * sigma))
    k = np.exp(-0.5 * (np.arange(-r, r + 1) / sigma) ** 2)
    k /= k.sum()
    xp = np.pad(x, [(r, r)] + [(0, 0)] * (x.ndim - 1), mode="edge")
    return sum(k[i] * xp[i:i + len(x)] for i in range(2 * r + 1))


def smooth_below(x: np.ndarray, sigma: float) -> np.ndarray:
    """A smoothing of (T,) ``x`` that never exceeds it: the running minimum over the Gaussian's reach (3 σ
    frames each way), then the Gaussian. A rise starts where ``x`` rises and ends 6 σ later; a fall ends where
    ``x`` falls (the hips never ask a planted leg to stretch)."""
    r = int(np.ceil(3 * sigma))
    if sigma < 0.5 or len(x) < 2:
        return x
    xp = np.pad(x, r, mode="edge")
    low = np.min([xp[i:i + len(x)] for i in range(2 * r + 1)], axis=0)
    return np.minimum(smooth_in_time(low, sigma), x)


def _segments(mask: np.ndarray) -> list:
    """[(first, stop)] of the runs of True in a (T,) bool array."""
    d = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return list(zip(np.nonzero(d == 1)[0], np.nonzero(d == -1)[0]))


def _blend(values: np.ndarray, known: np.ndarray) -> np.ndarray:
    """(T,) ``values`` where ``known``, eased from one known run to the next in between (a quintic: no jump in
    velocity or acceleration, so no jerk spike where a swing starts or ends), held before the first and after
    the last."""
    t = np.arange(len(values))
    a = np.maximum.accumulate(np.where(known, t, -1))                        # last known frame at or before t
    b = np.minimum.accumulate(np.where(known, t, len(t))[::-1])[::-1]         # first known frame at or after t
    a_, b_ = np.where(a < 0, b, a), np.where(b >= len(t), a, b)
    u = np.where(b_ > a_, (t - a_) / np.maximum(b_ - a_, 1), 0.0)
    u = u * u * u * (10 - 15 * u + 6 * u * u)
    return (1 - u) * values[a_] + u * values[b_]


def _footing_offset(terrain, pts: np.ndarray, reach: float, tol: float) -> np.ndarray:
    """(2,) the smallest shift of a foot's points ``pts`` (P, 2) along the foot's long axis after which at most
    FOOTING_OVERHANG of them hang over terrain more than ``tol`` below the highest one (the foot stands on a
    tread instead of balancing its toes on the next one); zero where the foot stands so already, or where no
    shift within ``reach`` does (a ramp, rough ground)."""
    c = pts - pts.mean(0)
    axis = np.linalg.svd(c, full_matrices=False)[2][0]                       # the foot's long axis
    shifts = np.arange(-reach, reach + 1e-9, FOOTING_STEP)
    shifts = shifts[np.argsort(np.abs(shifts), kind="stable")]
    cand = pts[None] + shifts[:, None, None] * axis                           # (C, P, 2)
    with torch.no_grad():
        f = terrain(torch.as_tensor(cand[..., 0]), torch.as_tensor(cand[..., 1])).double().numpy()
    hanging = (f < f.max(1, keepdims=True) - tol).mean(1)
    ok = hanging <= FOOTING_OVERHANG
    if not ok.any() or ok[0]:
        return np.zeros(2)
    return shifts[int(np.argmax(ok))] * axis


def terrain_lift(points: np.ndarray, side: np.ndarray, contact_w, terrain, fps: float, h_c: float) -> tuple:
    """Where copy-rotations' feet go on a terrain: (hips rise (T,), each foot's rise (T, 2), each foot's
    horizontal shift (T, 2, 2)), metres.

    points: (T, P, 3) the target's foot points in copy-rotations (its feet's mesh vertices), which walks at the
    flat height g0 of the terrain under its lowest foot point at frame 0; side: (P,) 0 / 1;
    contact_w: (T, 2) the source feet's contact weights (``FootModel.contact_w``), or None; terrain: the
    HeightField (any ``f(x, y)``); h_c: the target's height.
    A planted foot (contact weight > PLANTED) stands still on one footing for its stance: on the frames of full
    contact, it is shifted along its long axis by the least that puts it on a tread (not with most of it hanging
    over a lower one: ``_footing_offset``, within FOOTING_REACH × h_c) and raised by Δ = max over its points of
    (f(x, y) − z) + (its lowest point − g0), the median over those frames: its highest-standing point on the
    surface, its own height above the floor kept. In the air a foot eases from one stance to the next (a
    quintic), on an arc (64 u³ (1 − u)³ over the swing) as high as the terrain under it rises above that line. The hips
    rise by the lowest rise among the planted feet (both feet for a clip without contacts), interpolated through frames
    where none is planted, smoothed from below (``smooth_below``, HIPS_SMOOTH_S): the upper leg bends onto its step, the
    hips rise once the lower foot has left its step, and no planted leg is asked to stretch.
    """
    T = points.shape[0]
    with torch.no_grad():
        f = terrain(torch.as_tensor(points[..., 0]), torch.as_tensor(points[..., 1])).double().numpy()   # (T, P)
    above = points[..., 2] - f
    i0 = int(np.argmin(above[0]))
    g0 = points[0, i0, 2] - above[0, i0]                     # the terrain copy-rotations stands on at frame 0
    w = np.ones((T, 2)) if contact_w is None or not np.any(np.asarray(contact_w) > PLANTED) \
        else np.asarray(contact_w, dtype=np.float64)
    planted = w > PLANTED
    t = np.arange(T)
    rise, shift = np.zeros((T, 2)), np.zeros((T, 2, 2))
    for k in (0, 1):
        P = points[:, side == k]
        raw = (f[:, side == k] - P[..., 2]).max(1) + (P[..., 2].min(1) - g0)                     # (T,)
        stance, moved = np.full(T, np.nan), np.full((T, 2), np.nan)
        for a, b in _segments(planted[:, k]):   # the frames fully in contact (heel strike and toe-off move)
            full = a + np.nonzero(w[a:b, k] >= 0.99 * w[a:b, k].max())[0]
            mid = full[len(full) // 2]
            o = _footing_offset(terrain, P[mid, :, :2], FOOTING_REACH * h_c, FOOTING_FLAT * h_c)
            with torch.no_grad():
                fo = terrain(torch.as_tensor(P[full, :, 0] + o[0]), torch.as_tensor(P[full, :, 1] + o[1])).numpy()
            stance[a:b] = np.median((fo - P[full, :, 2]).max(1) + (P[full, :, 2].min(1) - g0))
            moved[a:b] = o
        if np.isnan(stance).all():
            rise[:, k] = raw
            continue
        known = ~np.isnan(stance)
        line = _blend(stance, known)
        clear = np.zeros(T)
        for a, b in _segments(~known):   # a swing: an arc high enough to clear the terrain under it
            u = (np.arange(a, b) - a + 1) / (b - a + 1)
            clear[a:b] = np.maximum(raw[a:b] - line[a:b], 0.0).max() * 64 * (u * (1 - u)) ** 3
        rise[:, k] = np.where(known, stance, line + clear)
        for c in (0, 1):
            shift[:, k, c] = _blend(moved[:, c], known)
    valid = planted.any(1)
    low = np.interp(t, t[valid], np.where(planted, rise, np.inf).min(1)[valid])
    hips_sigma = HIPS_SMOOTH_S * fps
    return (smooth_below(low, hips_sigma) if HIPS_BELOW else smooth_in_time(low, hips_sigma)), rise, shift


def _two_bone(hip, knee, ankle, target, forward):
    """New knee and ankle positions (T, 3) for a chain hip-knee-ankle whose ankle moves to ``target``: the thigh
    and shin keep their lengths; the knee bends the way it bends now, or towards ``forward`` (T, 3) (the
    toes) where the leg is nearly straight (blended over KNEE_BLEND metres of bend, so it never flips)."""
    a = np.linalg.norm(knee - hip, axis=-1)
    b = np.linalg.norm(ankle - knee, axis=-1)
    d = target - hip
    c = np.clip(np.linalg.norm(d, axis=-1), np.abs(a - b) + 1e-6, (a + b) * (1.0 - 1e-4))
    e = d / np.maximum(np.linalg.norm(d, axis=-1, keepdims=True), 1e-12)

    def across(v, line):   # the part of v (T, 3) perpendicular to a direction (T, 3)
        return v - (v * line).sum(-1, keepdims=True) * line
    e0 = (ankle - hip) / np.maximum(np.linalg.norm(ankle - hip, axis=-1, keepdims=True), 1e-12)
    f = across(forward, e0)
    bend = across(knee - hip, e0) + KNEE_BLEND * f / np.maximum(np.linalg.norm(f, axis=-1, keepdims=True), 1e-12)
    m = across(bend, e)
    m /= np.maximum(np.linalg.norm(m, axis=-1, keepdims=True), 1e-12)
    x = (a * a - b * b + c * c) / (2 * c)
    y = np.sqrt(np.maximum(a * a - x * x, 0.0))
    return hip + x[:, None] * e + y[:, None] * m, hip + c[:, None] * e


def onto_terrain(target: Character, motion: Motion, hips_lift: np.ndarray, foot_lift: np.ndarray,
                 foot_shift: np.ndarray = None) -> Motion:
    """``motion`` with the hips raised by ``hips_lift`` (T,) world metres and each leg bent (two-bone IK on the
    mapped upper leg, lower leg and foot) so that its foot rises by ``foot_lift`` (T, 2) in all and moves by
    ``foot_shift`` (T, 2, 2) horizontally (a foot keeps its world orientation). Legs the bone map lacks keep
    their rotations."""
    sk, bm = target.skeleton, target.bone_map
    T = motion.num_frames
    root = sk.index(bm["hips"])
    off = np.zeros((T, 3))
    off[:, 2] = hips_lift
    loc = motion.locations.copy()
    loc[:, root] += (root_jacobian_inverse(sk, root, motion, 1.0) @ off[..., None])[..., 0]
    rot = quat_to_matrix(np.asarray(motion.rotations, dtype=np.float64))          # (T, J, 3, 3) basis
    to_arm = inv(sk.object_matrix[:3, :3])                               # world vector -> armature
    shift = np.zeros((T, 2, 2)) if foot_shift is None else foot_shift
    fk = ForwardKinematics(sk, dtype=torch.float64)

    def pose():
        with torch.no_grad():
            p = fk(torch.as_tensor(rot), torch.as_tensor(loc))
        return p.rotations.numpy(), p.positions.numpy()

    def set_world(j, R):            # basis of bone j giving it world (armature) rotation R (T, 3, 3)
        G, _ = pose()
        par = sk.parents[j]
        frame = (G[:, par] if par >= 0 else np.eye(3)) @ sk.rest_local[j, :3, :3]
        rot[:, j] = np.swapaxes(frame, -1, -2) @ R

    for k, side in enumerate(("left", "right")):
        bones = [bm.get(f"{side}_{c}") for c in ("upper_leg", "lower_leg", "foot")]
        move = np.concatenate([shift[:, k], (foot_lift[:, k] - hips_lift)[:, None]], 1)          # (T, 3) world
        if any(b not in sk.names for b in bones) or np.abs(move).max() < 1e-5:
            continue
        ul, ll, ft = (sk.index(b) for b in bones)
        G, P = pose()
        foot_world = G[:, ft].copy()
        target_ankle = P[:, ft] + move @ to_arm.T
        knee, ankle = _two_bone(P[:, ul], P[:, ll], P[:, ft], target_ankle, G[:, ft][..., 1])   # foot's Y: toes
        turn1 = quat_to_matrix(quat_between(P[:, ll] - P[:, ul], knee - P[:, ul]))
        set_world(ul, turn1 @ G[:, ul])
        G, P = pose()
        turn2 = quat_to_matrix(quat_between(P[:, ft] - P[:, ll], ankle - P[:, ll]))
        set_world(ll, turn2 @ G[:, ll])
        set_world(ft, foot_world)
    q = matrix_to_quat(rot)
    flip = (q * motion.rotations).sum(-1) < 0            # the input's signs: as continuous as it was
    q[flip] *= -1
    return Motion(q, loc, motion.fps, motion.frame_start)
