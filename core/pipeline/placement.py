"""Several characters sharing one world placed together at the start (ReConForM §6.1): each target's own
copy-rotations result, turned and moved so that the targets keep the places their sources have relative to one
another, scaled by both characters' sizes (docs/copy_rotations.md)."""

from __future__ import annotations

import numpy as np

from ..character.frame import body_alignment, hip_height
from ..character.track import ClipTrack
from ..errors import CoreError
from ..rig.affine import inv
from ..rig.rotations import matrix_to_quat, quat_make_continuous, quat_to_matrix
from ..rig.tpose import _object_rotation
from ..types import Character, Motion

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
