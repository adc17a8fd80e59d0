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

from ..rig.affine import inv
from ..errors import CoreError
from ..contacts.feet import foot_vertices
from ..contacts.ground import auto_ground, ground_levels
from ..rig.humanoid import CANONICAL_BONES
from ..rig.kinematics import ForwardKinematics, Pose
from ..rig.rotations import matrix_to_quat, quat_make_continuous, quat_to_matrix
from ..rig.skinning import skin_mesh
from ..contacts.terrain import ground_height
from ..character.track import ClipTrack
from ..rig.tpose import (_object_rotation, body_frame, body_frame_matrix, posed_global, rest_is_standing,
                    tpose_basis, tpose_world)
from ..types import Character, Motion, Skeleton

FOOT_BONES = ("left_foot", "right_foot", "left_toes", "right_toes")
_NEEDED = ("hips", "left_upper_arm", "right_upper_arm", "left_upper_leg", "right_upper_leg", "left_foot",
           "right_foot")


def check_bone_map(character: Character, role: str):
    """Raise CoreError naming the bones copy-rotations needs and ``character``'s bone map lacks."""
    bm = character.bone_map or {}
    missing = [c for c in _NEEDED if bm.get(c) not in character.skeleton.names]
    if missing:
        raise CoreError(f"{role} armature '{character.name}': bone map lacks {', '.join(missing)}; "
                        f"map them (auto-detect or a preset) before retargeting.")


def foot_points(character: Character):
    """The points that can touch the ground: ("vertices", mesh vertex ids of both feet (``core.contacts.feet``)) with a
    mesh, else ("bones", the feet, toes and their descendant bones, whose heads stand in for the sole)."""
    if character.mesh is not None:
        ids = np.concatenate(foot_vertices(character, max_vertices=None))
        if len(ids):
            return "vertices", ids
    sk, bm = character.skeleton, character.bone_map
    roots = [sk.index(bm[c]) for c in FOOT_BONES if bm.get(c) in sk.names]
    bones = set()
    for r in roots:
        stack = [r]
        while stack:
            k = stack.pop()
            bones.add(k)
            stack.extend(sk.children(k))
    return "bones", np.array(sorted(bones), dtype=np.int64)


def lowest_foot_z(character: Character, pose_arm: Pose, points=None, ground=0.0) -> np.ndarray:
    """(...,) world z of the lowest foot point for an armature-space Pose; ``points`` = ``foot_points(...)``
    (computed when None). With a ``ground`` (a level or a terrain ``f(x, y)``): the lowest height above it."""
    kind, ids = points if points is not None else foot_points(character)
    sk = character.skeleton
    M = torch.as_tensor(sk.object_matrix, dtype=pose_arm.positions.dtype)
    if kind == "vertices":
        pts, _ = skin_mesh(sk, character.mesh, pose_arm, ids)
    else:
        pts = pose_arm.positions[..., torch.as_tensor(ids), :]
    w = pts @ M[:3, :3].T + M[:3, 3]
    z = w[..., 2] - ground_height(float(ground) if not callable(ground) else ground, w[..., 0], w[..., 1])
    return z.min(dim=-1).values.numpy()


def hip_height(character: Character, tpose: np.ndarray) -> float:
    """Hips above the lowest foot point, world units, with the character in its T-pose (basis ``tpose`` (J, 4))."""
    s, bm = character.skeleton, character.bone_map
    G = torch.as_tensor(posed_global(s, tpose))
    pose = Pose(G[:, :3, :3], G[:, :3, 3])
    z_foot = float(lowest_foot_z(character, pose))
    hips_z = float((s.object_matrix @ G[s.index(bm["hips"])].numpy())[2, 3])
    h = hips_z - z_foot
    if h <= 1e-9:
        raise CoreError(f"Armature '{character.name}': its hips are not above its feet in the T-pose; check the "
                        f"bone map (hips, feet).")
    return h


def reference_frame(character: Character, motion: Motion = None, track: ClipTrack = None):
    """Index of the clip frame the T-pose is built from, or None to build it from the rest pose.

    A standing rest pose is used as it is. Otherwise (BVH files whose rest pose lies on its side) the frame is
    the one where both feet are flattest on the floor: each mapped foot and toe bone head is at its lowest
    height of the clip at once (argmin over frames of the summed heights above those minima). A mid-step
    frame would tilt the reference feet, and every retargeted foot with them. ``track``: the clip's ClipTrack
    when the caller has one.
    """
    if motion is None or rest_is_standing(character.skeleton, character.bone_map):
        return None
    s, bm = character.skeleton, character.bone_map
    ids = [s.index(bm[c]) for c in ("left_foot", "right_foot", "left_toes", "right_toes") if bm.get(c) in s.names]
    if not ids or motion.num_frames == 1:
        return 0
    if track is None or track.character is not character or track.motion is not motion:
        track = ClipTrack(character, motion)
    z = track.world_positions[:, ids, 2]                                                             # (T, F)
    return int(np.argmin((z - z.min(axis=0)).sum(axis=1)))


def reference_basis(character: Character, motion: Motion = None, track: ClipTrack = None):
    """(J, 4) basis rotations the T-pose is built from (``motion`` at ``reference_frame``), or None for the
    rest pose."""
    k = reference_frame(character, motion, track)
    return None if k is None else motion.rotations[k]


def body_alignment(source: Character, source_motion: Motion, target: Character, track: ClipTrack):
    """(A (3, 3), k_ref, qs (Js, 4), qt (Jt, 4)): the rotation turning the source's body axes (left, forward,
    up) in its T-pose into the target's (a turn about the vertical), the source frame its T-pose is built from
    (None: its rest pose), and both T-pose bases."""
    k_ref = reference_frame(source, source_motion, track)
    base_s = None if k_ref is None else source_motion.rotations[k_ref]
    qs = tpose_basis(source.skeleton, source.bone_map, base_s)
    qt = tpose_basis(target.skeleton, target.bone_map, reference_basis(target))
    A = (body_frame_matrix(body_frame(target.skeleton, target.bone_map, qt))
         @ body_frame_matrix(body_frame(source.skeleton, source.bone_map, qs)).T)
    return A, k_ref, qs, qt


#: share of h_c: a source stands on its floor at a frame where its lowest foot point is this close to it
STAND_BAND = 0.01
#: at most this many of the source's standing frames (evenly spread) place the target's feet (``standing_frames``)
STAND_FRAMES = 256


def standing_frames(track: ClipTrack, source_ground="auto") -> tuple:
    """(frames (F,) int, heights (F,) metres): where ``copy_rotations`` stands the target's feet, and how high
    above its ground (before the hip-height ratio). Frame 0 at 0 when the source stands on its floor there
    (``source_ground``: a ``SolverSettings.source_ground`` value, read by ``ground.ground_levels``; "auto", its own
    floor, ``ground.auto_ground``; stands: its lowest foot point within ``STAND_BAND`` of h_c), has no feet on a
    mesh or never stands; otherwise (a capture's T-pose first frame, a take-off) the frames where it stands, at
    most ``STAND_FRAMES`` of them evenly spread, with its lowest foot point's height above its floor there."""
    src = track.character
    if src.mesh is None or not src.height or track.num_frames < 2 or not any(len(i) for i in track.foot_ids):
        return np.zeros(1, np.int64), np.zeros(1)
    above = track.lowest_foot - ground_levels(track, source_ground)                  # (T,) metres
    standing = np.flatnonzero(np.abs(above) <= STAND_BAND * float(src.height))
    if len(standing) == 0 or standing[0] == 0:
        return np.zeros(1, np.int64), np.zeros(1)
    frames = standing[np.unique(np.linspace(0, len(standing) - 1, min(len(standing), STAND_FRAMES)).round()
                                .astype(np.int64))]
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
            flat pass that says where a ground object is sampled, ``core.pipeline.retarget.clip_terrain``): its rotations
            and hips path are taken as they are and only the height on ``ground`` is found again.
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


#: source hips this far apart (metres) or closer count fully in ``place_together``'s placement; a pair farther
#: apart counts (NEAR / distance)⁴: a couple's own distance wins over its relation to dancers across the room
NEAR = 1.0
#: ``_placement`` works on this many (frame, character, character) entries at a time
PLACEMENT_ENTRIES = 1 << 20


def place_together(pairs) -> list:
    """Copy-rotations of several characters sharing one world (ReConForM §6.1): each target's own copy-rotations
    result, turned and moved so that the targets keep the places their sources have relative to one another.

    ``copy_rotations`` puts one target where its armature stands, facing its own rest direction, and moves its
    hips by the source's displacement scaled by its own hip-height ratio r. Two partners retargeted one by one
    therefore both stand at their own armatures (often the same spot), each facing its rest direction. Here the
    first pair is the anchor and is left exactly as ``copy_rotations`` made it (one pair: nothing changes);
    every other target k is

    - turned about the vertical by Y_k = A_0 A_kᵀ (A: copy-rotations' source → target body alignment), so that
      every target faces, in the anchor's frame, the way its source faces in the shared world;
    - moved horizontally so that every two targets j, k stand as their sources do, scaled by both sizes:
      p_k(t) − p_j(t) ≈ A_0 · r̄_jk · (h_k(t) − h_j(t)) in x and y, with h the sources' hips and
      r̄_jk = (r_j + r_k) / 2. Two characters: exactly that, from the anchor. More: the sizes differ, so no one
      placement meets every pair; frame by frame, the least-squares placement (anchor fixed) with pair (j, k)
      weighted min(1, NEAR / |h_k − h_j|)⁴ (``_placement``), so that a couple stands as its own sizes say and a
      far dancer's motion does not leak into it. Each keeps its own height (its feet on the floor where its
      source stands, as copy-rotations put them).

    Args:
        pairs: sequence of (source Character, source Motion, source ClipTrack, target Character, init Motion),
            the inits being ``copy_rotations`` results; all clips the same frames.
    Returns:
        [Motion] one per target (the first is the anchor's init itself).
    """
    pairs = list(pairs)
    if not pairs:
        return []
    src0, _, _, tgt0, init0 = pairs[0]
    for src, _, _, _, init in pairs[1:]:
        if init.num_frames != init0.num_frames:
            raise CoreError(f"'{src.name}' plays {init.num_frames} frames but '{src0.name}' plays "
                            f"{init0.num_frames}: characters placed together must share the frame range.")
    if len(pairs) == 1:
        return [init0]
    aligned = [body_alignment(src, smo, tgt, trk) for src, smo, trk, tgt, _ in pairs]
    A0 = aligned[0][0]
    hips = np.stack([trk.world_positions[:, src.skeleton.index(src.bone_map["hips"])]
                     for src, _, trk, _, _ in pairs], 1)                                      # (T, K, 3)
    ratios = np.array([hip_height(tgt, qt) / hip_height(src, qs)
                       for (src, _, _, tgt, _), (_, _, qs, qt) in zip(pairs, aligned)])     # (K,)
    p0 = ClipTrack(tgt0, init0).world_positions[:, tgt0.skeleton.index(tgt0.bone_map["hips"])]
    placed = _placement(hips, ratios, A0, p0)
    out = [init0]
    for (src, smo, trk, tgt, init), (A, *_), p_new in zip(pairs[1:], aligned[1:], placed[:, 1:].transpose(1, 0, 2)):
        ttrack = ClipTrack(tgt, init)
        ht = tgt.skeleton.index(tgt.bone_map["hips"])
        p_new = p_new.copy()
        p_new[:, 2] = ttrack.world_positions[:, ht, 2]
        out.append(_turn_hips(tgt, init, ttrack, ht, A0 @ A.T, p_new))
    return out


def _placement(hips: np.ndarray, ratios: np.ndarray, A0: np.ndarray, p0: np.ndarray) -> np.ndarray:
    """(T, K, 3) the targets' hips (their heights to be replaced) placed as ``place_together`` says: the anchor's
    ``p0`` (T, 3), and for k ≥ 1 the minimiser of Σ_j<k w_jk |p_k − p_j − A0 r̄_jk (h_k − h_j)|² per frame.

    Args:
        hips: (T, K, 3) the sources' hips in the shared world.
        ratios: (K,) each pair's hip-height ratio (target / source).
        A0: (3, 3) the anchor's source → target body alignment.
        p0: (T, 3) the anchor target's hips.
    """
    T, K, _ = hips.shape
    out = np.empty((T, K, 3))
    out[:, 0] = p0
    step = max(1, PLACEMENT_ENTRIES // (K * K))             # frames at a time: a crowd's (F, K, K, 3) stays bounded
    for s in range(0, T, step):
        h, p = hips[s:s + step], p0[s:s + step]
        rel = (h[:, None, :, :] - h[:, :, None, :]) @ A0.T                              # (F, j, k, 3): h_k − h_j
        rel *= 0.5 * (ratios[:, None] + ratios[None, :])[None, :, :, None]
        dist = np.linalg.norm((h[:, None, :, :2] - h[:, :, None, :2]), axis=-1)         # (F, K, K)
        w = np.minimum(1.0, NEAR / np.maximum(dist, 1e-9)) ** 4
        w[:, np.arange(K), np.arange(K)] = 0.0
        # normal equations, anchor fixed: Σ_j w_jk (p_k − p_j) = Σ_j w_jk rel_jk for k ≥ 1
        lap = -w[:, 1:, 1:]
        lap[:, np.arange(K - 1), np.arange(K - 1)] += w[:, 1:, :].sum(2)
        rhs = (w[..., None] * rel).sum(1)[:, 1:] + w[:, 1:, 0, None] * p[:, None, :]    # (F, K-1, 3)
        out[s:s + step, 1:] = np.linalg.solve(lap, rhs)
    return out


def _turn_hips(target: Character, init: Motion, track: ClipTrack, ht: int, Y: np.ndarray,
               p_world: np.ndarray) -> Motion:
    """``init`` with bone ``ht``'s world rotation turned by Y (3, 3) and its head put at ``p_world`` (T, 3); its
    ancestors' transforms (from ``track``, the init's ClipTrack) stay."""
    sk = target.skeleton
    R_rest, t_rest = sk.rest_local[ht, :3, :3], sk.rest_local[ht, :3, 3]
    par = int(sk.parents[ht])
    M = sk.object_matrix
    A_obj = _object_rotation(sk)
    if par < 0:
        P_rot = np.broadcast_to(A_obj, (init.num_frames, 3, 3))       # world rotation of the parent space
        P_arm_rot = np.broadcast_to(np.eye(3), (init.num_frames, 3, 3))
        P_arm_pos = np.zeros((init.num_frames, 3))
    else:
        P_rot = track.world_rotations[:, par]
        P_arm_rot = track.arm_rotations[:, par].numpy()
        P_arm_pos = track.arm_positions[:, par].numpy()
    C = P_rot @ R_rest                                                 # (T, 3, 3) world rest frame of the bone
    basis = quat_to_matrix(init.rotations[:, ht])
    new_basis = np.swapaxes(C, -1, -2) @ Y @ C @ basis
    rotations = init.rotations.copy()
    q = matrix_to_quat(new_basis)
    q[(q * init.rotations[:, ht]).sum(-1) < 0] *= -1
    rotations[:, ht] = quat_make_continuous(q, axis=0)
    M_inv = inv(M)
    p_arm = p_world @ M_inv[:3, :3].T + M_inv[:3, 3]
    local = ((p_arm - P_arm_pos)[:, None, :] @ P_arm_rot)[:, 0]        # parent_rotᵀ (p − parent_pos)
    locations = init.locations.copy()
    locations[:, ht] = (local - t_rest) @ R_rest
    return Motion(rotations, locations, init.fps, init.frame_start)


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


__all__ = ["POSTURE_NOTE_DEG", "body_alignment", "copy_rotations", "foot_points", "hip_height", "lowest_foot_z",
           "place_together", "posture_note",
           "reference_basis", "reference_frame"]
