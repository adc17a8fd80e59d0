"""Copy-rotations retargeting: the baseline and the solver's initial guess (docs/copy_rotations.md).

Both characters are first put in the shared T-pose (``core.rig.tpose``). For every canonical bone mapped on both
sides, the target bone's WORLD rotation at frame t is

    W_t(t) = A @ W_s(t) @ W_s^T^-1 @ A^T @ W_t^T

where ``W^T`` is a bone's world rotation in its character's T-pose and ``A = F_t @ F_s^T`` turns the source's
body axes (left, forward, up) into the target's (characters may face different ways). Target bones that are
not mapped keep their T-pose local rotation. The hips move by the source hips displacement (from its T-pose
position), turned by ``A`` and scaled by the ratio of hip heights (hips above the lowest foot point, T-pose,
world space); the whole clip is then lifted so that the lowest foot point is on the ground (z = 0, or the
terrain under it, ``ground``) at frame 0, or, when the source does not stand on its own floor at frame 0 (a
capture's T-pose first frame), as high above it as the source's above its floor where the source stands.
"""

from __future__ import annotations

import numpy as np
import torch

from ..character.frame import body_alignment, check_bone_map, foot_points, hip_height, lowest_foot_z
from ..character.track import ClipTrack
from ..contacts.ground import ground_levels, standing_on_floor
from ..errors import CoreError
from ..rig.affine import inv
from ..rig.humanoid import CANONICAL_BONES
from ..rig.kinematics import ForwardKinematics
from ..rig.rotations import matrix_to_quat, quat_make_continuous, quat_to_matrix
from ..rig.tpose import _object_rotation, posed_global, tpose_world
from ..types import Character, Motion, Skeleton

#: at most this many of the source's standing frames (evenly spread) place the target's feet (``standing_frames``)
STAND_FRAMES = 256


def standing_frames(track: ClipTrack, source_ground="auto") -> tuple:
    """(frames (F,) int, heights (F,) metres): where ``copy_rotations`` stands the target's feet, and how high
    above its ground (before the hip-height ratio). Frame 0 at 0 when the source stands on its floor there
    (``source_ground``: a ``SolverSettings.source_ground`` value, read by ``ground.ground_levels``; "auto", its own
    floor, ``ground.auto_ground``; stands: ``ground.standing_on_floor``), has no feet on a
    mesh or never stands; otherwise (a capture's T-pose first frame, a take-off) the frames where it stands, at
    most ``STAND_FRAMES`` of them evenly spread, with its lowest foot point's height above its floor there."""
    src = track.character
    if src.mesh is None or not src.height or track.num_frames < 2 or not any(len(i) for i in track.foot_ids):
        return np.zeros(1, np.int64), np.zeros(1)
    above = track.lowest_foot - ground_levels(track, source_ground)                  # (T,) metres
    frames = standing_on_floor(above, float(src.height), STAND_FRAMES)
    if len(frames) == 0 or frames[0] == 0:
        return np.zeros(1, np.int64), np.zeros(1)
    return frames, above[frames]


def copy_rotations(source: Character, source_motion: Motion, target: Character,
                   source_track: ClipTrack = None, ground=0.0, source_ground="auto", like: Motion = None) -> Motion:
    """Retarget ``source_motion`` onto ``target`` by copying T-pose-relative world rotations.

    Args:
        source: Character with skeleton and bone_map (mesh optional: used for the ground and hip height).
        source_motion: Motion of the source skeleton, (T, Js, 4) / (T, Js, 3).
        target: Character with skeleton and bone_map (mesh optional, same use).
        source_track: the source clip's ClipTrack when the caller has one (its bones are evaluated once).
        ground: the target's ground: a level (metres) or a terrain ``f(x, y)`` (``core.contacts.terrain.HeightField``);
            the lowest foot point stands on it at frame 0 (or, when the source does not stand on its floor there,
            where it does: ``standing_frames``), and the rest of the clip follows at flat height.
        source_ground: the source's floor that "where it stands" is read against, as ``SolverSettings.
            source_ground`` gives it (the solve's): "auto" (its own floor, ``ground.auto_ground``), "zero",
            "track", a level or one level per frame.
        like: this function's result for the same characters, clip and ``source_ground`` on another ground (the
            flat pass that says where a ground object is sampled, ``core.pipeline.retarget.clip_terrain``): its
            rotations and hips path are taken as they are and only the height on ``ground`` is found again.
    Returns:
        Motion of the target skeleton, (T, Jt, 4) sign-continuous WXYZ and (T, Jt, 3) locations
        (only the hips bone moves), same fps and frame_start as the source.
    """
    check_bone_map(source, "Source")
    check_bone_map(target, "Target")
    S, Tg = source.skeleton, target.skeleton
    sm, tm = source.bone_map, target.bone_map
    if source_motion.rotations.shape[1] != S.num_bones:
        raise CoreError(f"Source motion has {source_motion.rotations.shape[1]} bones but armature "
                        f"'{S.name}' has {S.num_bones}.")
    T = source_motion.num_frames
    track = source_track
    if track is None or track.character is not source or track.motion is not source_motion:
        track = ClipTrack(source, source_motion)
    A, k_ref, qs, qt = body_alignment(source, source_motion, target, track)
    hs, ht = S.index(sm["hips"]), Tg.index(tm["hips"])
    ratio = hip_height(target, qt) / hip_height(source, qs)
    if like is not None:
        if like.rotations.shape != (T, Tg.num_bones, 4):
            raise CoreError(f"The copy-rotations result given for '{Tg.name}' has {like.rotations.shape[0]} frames "
                            f"of {like.rotations.shape[1]} bones, not {T} of {Tg.num_bones}: it is not this "
                            "clip's on this target.")
        return _stand(target, qt, ht, like.rotations, _hips_world(Tg, qt, ht, like.locations[:, ht]), ratio,
                      track, ground, source_ground, source_motion)
    WsT, psT = tpose_world(S, qs)
    WtT, ptT = tpose_world(Tg, qt)

    # source world rotations and hips positions over the clip (the track's one forward-kinematics pass)
    Rs = track.world_rotations                                                # (T, Js, 3, 3) world
    hips_s = track.world_positions[:, hs]                                     # (T, 3)

    # mapped pairs (target index, source index)
    pairs = {}
    for c in CANONICAL_BONES:
        if sm.get(c) in S.names and tm.get(c) in Tg.names:
            pairs[Tg.index(tm[c])] = S.index(sm[c])
    # W_t(t) = A W_s(t) W_sT^T A^T W_tT for mapped target bones
    Jt = Tg.num_bones
    Wt = np.empty((T, Jt, 3, 3))
    basis = np.empty((T, Jt, 3, 3))
    qt_m = quat_to_matrix(qt)
    R_obj_t = _object_rotation(Tg)
    for j, p in enumerate(Tg.parents):                          # tree loop, vectorised over frames
        frame_j = (R_obj_t if p < 0 else Wt[:, p]) @ Tg.rest_local[j, :3, :3]
        if j in pairs:
            i = pairs[j]
            Wt[:, j] = A @ Rs[:, i] @ (WsT[i].T @ A.T @ WtT[j])
            basis[:, j] = np.swapaxes(frame_j, -1, -2) @ Wt[:, j]
        else:
            basis[:, j] = qt_m[j]
            Wt[:, j] = frame_j @ qt_m[j]
    rotations = quat_make_continuous(matrix_to_quat(basis))

    # root: scaled displacement, then the feet on the ground where the source stands (``standing_frames``)
    ref_s = hips_s[k_ref] if k_ref is not None else psT[hs]
    p_world = ptT[ht] + ((hips_s - ref_s) @ A.T) * ratio                       # (T, 3) target hips, world
    return _stand(target, qt, ht, rotations, p_world, ratio, track, ground, source_ground, source_motion)


def _stand(target: Character, qt: np.ndarray, ht: int, rotations: np.ndarray, p_world: np.ndarray, ratio: float,
           track: ClipTrack, ground, source_ground, source_motion: Motion) -> Motion:
    """The target's Motion: basis ``rotations`` (T, Jt, 4), its hips (bone ``ht``) at ``p_world`` (T, 3) moved up
    or down as one so that its lowest foot point stands on ``ground`` where the source stands (``ratio`` × the
    source's height above its floor there, ``standing_frames``); ``qt``: the target's T-pose basis."""
    Tg = target.skeleton
    T = len(p_world)
    locations = np.zeros((T, Tg.num_bones, 3))
    locations[:, ht] = _hips_location(Tg, qt, ht, p_world)
    fk_t = ForwardKinematics(Tg, dtype=torch.float64)
    frames, above = standing_frames(track, source_ground)
    if callable(ground):            # on a terrain, the first of them: its height under the feet is that frame's
        frames, above = frames[:1], above[:1]
    rot_f = torch.as_tensor(quat_to_matrix(rotations[frames]))
    points = foot_points(target)
    # Lifting the hips lifts the feet by the same amount unless foot vertices carry weight on bones above the
    # hips (e.g. a 'root' bone): the secant step handles that linear case exactly, in two or three evaluations.
    z_prev, shift_prev, shift = None, 0.0, 0.0
    for _ in range(4):
        pose_f = fk_t(rot_f, torch.as_tensor(locations[frames]))
        z = float(np.median(lowest_foot_z(target, pose_f, points, ground) - above * ratio))
        if abs(z) < 1e-7:
            break
        gain = 1.0 if z_prev is None or abs(shift - shift_prev) < 1e-12 else (z_prev - z) / (shift - shift_prev)
        z_prev, shift_prev = z, shift
        shift += z / (gain if abs(gain) > 1e-3 else 1.0)
        p_now = p_world.copy()
        p_now[:, 2] -= shift
        locations[:, ht] = _hips_location(Tg, qt, ht, p_now)
    return Motion(rotations, locations, source_motion.fps, source_motion.frame_start)


#: a result whose torso points this far from the source's on most frames gets a note (``posture_note``)
POSTURE_NOTE_DEG = 45.0


def posture_note(source_track: ClipTrack, target: Character, motion: Motion):
    """One line when the torso (hips to head, world) of ``motion`` on ``target`` points more than
    ``POSTURE_NOTE_DEG`` away from the source's on most frames (a wrongly mapped spine or head, a rig whose
    bones do not stand the way its mesh does), else None: such a result looks like a motion and is wrong."""
    src = source_track.character
    if not all(c.bone_map.get(b) in c.skeleton.names for c in (src, target) for b in ("hips", "head")):
        return None
    track = ClipTrack(target, motion)

    def torso(c, P):
        d = P[:, c.skeleton.index(c.bone_map["head"])] - P[:, c.skeleton.index(c.bone_map["hips"])]
        return d / np.maximum(np.linalg.norm(d, axis=-1, keepdims=True), 1e-12)
    cos = (torso(src, source_track.world_positions) * torso(target, track.world_positions)).sum(-1)
    angle = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
    if np.median(angle) <= POSTURE_NOTE_DEG:
        return None
    return (f"Target '{target.name}': its torso points {np.median(angle):.0f}° away from the source's on most "
            f"frames: check its bone map (hips, spine, head) and that its rest pose stands the way its mesh does.")


def _hips_world(skeleton: Skeleton, tpose: np.ndarray, j: int, location: np.ndarray) -> np.ndarray:
    """(T, 3) world head of bone ``j`` at basis ``location`` (T, 3), its ancestors in the T-pose: the inverse of
    ``_hips_location``."""
    rl = skeleton.rest_local[j]
    local = location @ rl[:3, :3].T + rl[:3, 3]
    p = int(skeleton.parents[j])
    if p >= 0:
        G = posed_global(skeleton, tpose)[p]
        local = local @ G[:3, :3].T + G[:3, 3]
    M = skeleton.object_matrix
    return local @ M[:3, :3].T + M[:3, 3]


def _hips_location(skeleton: Skeleton, tpose: np.ndarray, j: int, p_world: np.ndarray) -> np.ndarray:
    """(T, 3) basis location of bone ``j`` putting its head at world points ``p_world`` (T, 3); its ancestors
    stay in the T-pose (basis rotation ``tpose``, no location)."""
    M_inv = inv(skeleton.object_matrix)
    p_arm = p_world @ M_inv[:3, :3].T + M_inv[:3, 3]
    p = int(skeleton.parents[j])
    if p >= 0:
        G = posed_global(skeleton, tpose)[p]
        local = (p_arm - G[:3, 3]) @ G[:3, :3]          # G_rot^T (p - G_pos), row form
    else:
        local = p_arm
    rl = skeleton.rest_local[j]
    return (local - rl[:3, 3]) @ rl[:3, :3]             # rest_rot^T (local - rest_trans)
