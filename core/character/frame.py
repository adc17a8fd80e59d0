"""A character's reference frame, as copy-rotations, the gaze and the character's completion read it: the bones
copy-rotations needs, the points of its feet that can touch the ground, its hip height, and the clip frame its
T-pose is built from when its rest pose lies down (docs/copy_rotations.md)."""

from __future__ import annotations

import numpy as np
import torch

from ..contacts.feet import foot_vertices
from ..contacts.terrain import ground_height
from ..errors import CoreError
from ..rig.kinematics import Pose
from ..rig.skinning import skin_mesh
from ..rig.tpose import body_frame, body_frame_matrix, posed_global, rest_is_standing, tpose_basis
from ..types import Character, Motion
from .track import ClipTrack

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
