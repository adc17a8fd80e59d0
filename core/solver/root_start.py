"""Where the solve's root starts and what L_reg anchors its height to (ReConForM leaves both to us: docs/solver.md
"The root's start"). Horizontally, a target with another stride than copy-rotations' slides; the root is
moved so the source's planted feet stay put before the first Adam step. Vertically, copy-rotations places a clip
once, so where the source's floor drifts its target sinks or floats with it; L_reg's anchor is raised by that
drift (``floor_drift_lift``), so the floor terms' lift is not charged to the limbs."""

from __future__ import annotations

import numpy as np
import torch

from ..character.frame import foot_points, lowest_foot_z
from ..character.track import ClipTrack
from ..contacts.ground import standing_on_floor
from ..descriptors.pose import sliding
from ..rig.kinematics import ForwardKinematics
from ..rig.rotations import quat_to_matrix
from ..types import Character, Motion

#: at most this many of the frames where the source stands on its floor (evenly spread) say how high copy-rotations'
#: target stands (its feet are skinned on each: 64 take a quarter of 256's time, and on the shared drifting clips
#: move the lift by 0.2 mm at most)
STAND_FRAMES = 64


def root_xy_from_feet(objective, p0: torch.Tensor, fps: float) -> torch.Tensor:
    """(T, 2) horizontal root offset (metres) that keeps the source's planted feet planted, from the
    copy-rotations key vertices ``p0`` (T, N, 3), with ``objective``'s source velocities and floor weights.

    Per frame step t -> t+1, the horizontal root velocity is corrected by the W_floor-weighted mean of
    (source velocity − copy-rotations velocity) of the key vertices (the velocity L_sliding compares);
    integrated over time this is an offset o(t) (held where no key vertex is near the floor), later fitted
    to the B-spline controls as a weighted average (quasi-interpolation, ``Parametrisation.set_root_xy``).
    Copy-rotations' walk speed follows the hip-height ratio, so a target with another stride slides; this
    removes most of it before the first step instead of asking Adam to move every root control by tens of
    centimetres.
    """
    ob = objective
    with torch.no_grad():
        vt = sliding(p0, fps)                                                # (T-1, N, 2)
        w = ob.wf_src[:-1]                                                # (T-1, N)
        wsum = w.sum(-1, keepdim=True)
        dv = (w[..., None] * (ob.src_vel_cmp - vt)).sum(1) / wsum.clamp_min(1e-6)
        dv = torch.where(wsum > 1e-3, dv, torch.zeros_like(dv))
        return torch.cat([torch.zeros_like(dv[:1]), torch.cumsum(dv, 0) / fps], 0)   # (T, 2) metres


def floor_drift_lift(track: ClipTrack, levels, target: Character, init: Motion, ground=0.0):
    """(T,) metres, or None where the source's floor is one level: how far the target of ``init`` (copy-rotations)
    would rise at each frame to stand on its ``ground`` as high above it as the source above its floor, given as
    ``levels`` (T,) (``core.contacts.ground.ground_levels``) under the source ``track``.

    Copy-rotations scales the source's hips path by the hip-height ratio r and places the clip once, so a floor
    that drifts by L(t) moves its target by r L(t). The lift is r (L̄ − L(t)) plus what ``init`` stands too low where
    the source stands on its floor (``ground.standing_on_floor``; at most ``STAND_FRAMES`` of those frames): the median
    over them of r × the source's height above its floor − the target's above its ground, with L̄ the median of L
    there; r is read off ``init`` on the same frames (the slope of its hips' height against the source's). None where
    the source never stands."""
    L = np.asarray(levels, dtype=np.float64)
    src = track.character
    if L.ndim == 0 or float(np.ptp(L)) == 0.0 or target.mesh is None or not src.height:
        return None
    above = track.lowest_foot - L                                                             # (T,) metres
    frames = standing_on_floor(above, float(src.height), STAND_FRAMES)
    if len(frames) == 0:
        return None
    sk = target.skeleton
    pose = ForwardKinematics(sk, dtype=torch.float64)(torch.as_tensor(quat_to_matrix(init.rotations[frames])),
                                                     torch.as_tensor(init.locations[frames]))
    hips = pose.positions[:, sk.index(target.bone_map["hips"])].numpy() @ sk.object_matrix[2, :3]   # (F,) height
    ratio = _slope(track.world_positions[frames, src.skeleton.index(src.bone_map["hips"]), 2], hips,
                   float(target.height or 0.0) / float(src.height))
    low = ratio * above[frames] - lowest_foot_z(target, pose, foot_points(target), ground)     # (F,) metres
    return ratio * (float(np.median(L[frames])) - L) + float(np.median(low))


def _slope(x: np.ndarray, y: np.ndarray, fallback: float) -> float:
    """The least-squares slope of y (T,) against x (T,), or ``fallback`` where x barely moves (1 µm rms)."""
    dx, dy = x - x.mean(), y - y.mean()
    var = float(dx @ dx)
    return float(dx @ dy) / var if var > 1e-12 * len(x) else fallback
