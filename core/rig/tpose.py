"""Bring any humanoid into the shared T-pose through its bone map.

The T-pose is the common standard pose of the method (ReConForM §3): arms straight out to the sides,
horizontal; hands in line with the forearms; legs straight down; every other bone as in the rest pose
(feet keep their rest orientation in world space, so soles stay as modelled).
Directions are measured in world space (Z up), so armature objects rotated by importers (FBX Y-up) work.
Skeletons whose rest pose lies down (some BVH sets) are stood up first (``standing_skeleton``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .affine import inv
from ..errors import CoreError
from .kinematics import global_matrices
from .rotations import matrix_to_quat, quat_between, quat_to_matrix
from ..types import Skeleton

UP = np.array([0.0, 0.0, 1.0])


class BodyFrame(NamedTuple):
    """Unit world axes of a character: ``left`` (its own left), ``forward`` (where it faces), ``up`` (+Z)."""

    left: np.ndarray
    forward: np.ndarray
    up: np.ndarray


def _object_rotation(skeleton: Skeleton) -> np.ndarray:
    """(3, 3) rotation part of the armature object's matrix (scale removed per column)."""
    A = skeleton.object_matrix[:3, :3]
    return A / np.linalg.norm(A, axis=0)


#: (J, 4, 4) armature-space bone matrices for basis rotations (J, 4), zero basis locations
#: (``core.pipeline.copy_rotations``)
posed_global = global_matrices


def _world_rest(skeleton: Skeleton, basis=None):
    G = global_matrices(skeleton, basis)
    rot = _object_rotation(skeleton) @ G[:, :3, :3]
    pos = (skeleton.object_matrix @ G)[:, :3, 3]
    return rot, pos


def body_frame(skeleton: Skeleton, bone_map: dict, basis=None) -> BodyFrame:
    """Character axes in world space, from the rest pose (or the pose given by ``basis`` (J, 4)):
    left from the right to the left upper arm (or upper leg, or shoulder), up = +Z, forward = left x up."""
    _, pos = _world_rest(skeleton, basis)
    for a, b in (("left_upper_arm", "right_upper_arm"), ("left_upper_leg", "right_upper_leg"),
                 ("left_shoulder", "right_shoulder")):
        if bone_map.get(a) in skeleton.names and bone_map.get(b) in skeleton.names:
            d = pos[skeleton.index(bone_map[a])] - pos[skeleton.index(bone_map[b])]
            d = d - UP * (d @ UP)
            if np.linalg.norm(d) > 1e-9:
                left = d / np.linalg.norm(d)
                return BodyFrame(left, np.cross(left, UP), UP.copy())
    raise CoreError(f"Armature '{skeleton.name}': cannot tell its left from its right; map both upper arms "
                    f"or both upper legs in the bone map.")


def body_frame_matrix(frame: BodyFrame) -> np.ndarray:
    """(3, 3) matrix whose columns are the character's left, forward and up axes (a rotation)."""
    return np.stack([frame.left, frame.forward, frame.up], axis=1)


def rest_is_standing(skeleton: Skeleton, bone_map: dict) -> bool:
    """True when the rest pose is a standing humanoid: head above the hips and both feet below them.

    Some BVH exporters (e.g. the Bandai-Namco set) write offsets whose rest pose lies on its side; their
    T-pose must then be built from a posed frame (``copy_rotations`` uses the clip's first frame).
    """
    _, pos = _world_rest(skeleton)
    need = ("hips", "head", "left_foot", "right_foot")
    if not all(bone_map.get(c) in skeleton.names for c in need):
        return True
    hips, head, lf, rf = (pos[skeleton.index(bone_map[c])] for c in need)
    for d, sign in ((head - hips, 1.0), (lf - hips, -1.0), (rf - hips, -1.0)):
        n = np.linalg.norm(d)
        if n < 1e-12 or sign * d[2] < 0.7 * n:
            return False
    return True


#: a torso (hips -> head) more than this far from the world's up axis lies down
LYING_TILT_DEG = 45.0


def torso_tilt(skeleton: Skeleton, bone_map: dict):
    """(angle in degrees between the rest pose's hips -> head direction and world up, that direction (3,)), or
    None when hips or head are not mapped."""
    if not all(bone_map.get(c) in skeleton.names for c in ("hips", "head")):
        return None
    _, pos = _world_rest(skeleton)
    d = pos[skeleton.index(bone_map["head"])] - pos[skeleton.index(bone_map["hips"])]
    n = np.linalg.norm(d)
    if n < 1e-12:
        return None
    return float(np.degrees(np.arccos(np.clip(d[2] / n, -1.0, 1.0)))), d / n


def lying_rest_message(skeleton: Skeleton, bone_map: dict):
    """Why a character whose rest pose lies down (and whose object does not stand it up) cannot receive a motion,
    and what to do, in one line; None when its rest pose stands.

    The shared T-pose straightens arms and legs in world space but keeps the torso as it rests, so such a target
    gets vertical legs under a horizontal torso: a result that looks like a motion and is wrong. (A source that
    lies at rest is stood up from its own clip instead, ``core.character.frame.reference_frame``.)"""
    tilt = torso_tilt(skeleton, bone_map)
    if tilt is None or tilt[0] <= LYING_TILT_DEG:
        return None
    angle, d = tilt
    axis = int(np.argmax(np.abs(d)))
    where = ("-+"[int(d[axis] > 0)] + "XYZ"[axis])
    q = quat_between(d, UP)                                  # the rotation that stands it up, about a world axis
    rot_axis = q[1:] / max(np.linalg.norm(q[1:]), 1e-12)
    k = int(np.argmax(np.abs(rot_axis)))
    deg = float(np.degrees(2.0 * np.arccos(np.clip(q[0], -1.0, 1.0)))) * float(np.sign(rot_axis[k]))
    return (f"Armature '{skeleton.name}': its rest pose lies down (hips to head along world {where}, {angle:.0f}° "
            f"from up) and its object does not stand it up, so the motion would play lying on the floor: rotate "
            f"the armature object about {'XYZ'[k]} by {deg:.0f}° so that the character stands in its rest pose "
            f"(Object > Apply > Rotation then keeps it standing), and retarget again.")


def standing_skeleton(skeleton: Skeleton, bone_map: dict) -> Skeleton:
    """The skeleton itself when its rest pose stands (``rest_is_standing``), else a copy whose object matrix
    is turned so that it does (hips -> head up, right -> left hip horizontal).

    Some BVH files (the Bandai-Namco set) have a rest pose lying on its side; the shared T-pose is built from
    the rest pose, so such skeletons are stood up first. Armature space is unchanged, so meshes and key
    vertices computed on the copy are valid for the original.
    """
    if rest_is_standing(skeleton, bone_map):
        return skeleton
    G = skeleton.object_matrix @ skeleton.rest_global
    pos = {c: G[skeleton.index(b), :3, 3] for c, b in bone_map.items() if b in skeleton.names}
    if not all(c in pos for c in ("hips", "head", "left_upper_leg", "right_upper_leg")):
        return skeleton
    up = pos["head"] - pos["hips"]
    up /= np.linalg.norm(up)
    left = pos["left_upper_leg"] - pos["right_upper_leg"]
    left -= up * (left @ up)
    if np.linalg.norm(left) < 1e-9:
        return skeleton
    left /= np.linalg.norm(left)
    A = np.stack([left, np.cross(left, up), up], 1)
    B = np.stack([[1.0, 0, 0], np.cross([1.0, 0, 0], [0, 0, 1.0]), [0, 0, 1.0]], 1)
    R = np.eye(4)
    R[:3, :3] = B @ A.T
    return Skeleton(skeleton.name, skeleton.names, skeleton.parents, skeleton.rest_local, R @ skeleton.object_matrix)


def _chain_targets(frame: BodyFrame) -> dict:
    """canonical bone -> (canonical bone its direction points to or None for its own Y axis, world target)."""
    t = {}
    for side, sign in (("left", 1.0), ("right", -1.0)):
        out = sign * frame.left
        t[f"{side}_upper_arm"] = (f"{side}_lower_arm", out)
        t[f"{side}_lower_arm"] = (f"{side}_hand", out)
        t[f"{side}_hand"] = (f"{side}_middle_1", out)
        t[f"{side}_upper_leg"] = (f"{side}_lower_leg", -UP)
        t[f"{side}_lower_leg"] = (f"{side}_foot", -UP)
    return t


def tpose_basis(skeleton: Skeleton, bone_map: dict, base=None) -> np.ndarray:
    """Local basis rotations that put ``skeleton`` from its rest pose (or from the pose ``base``) into the T-pose.

    Arms and hands point straight along the character's left/right axis, legs straight down (each bone's
    direction = head to the head of its mapped canonical child, or its own Y axis without one; rotated by the
    shortest arc, so the roll is kept), feet keep their world orientation, every other bone keeps its local
    rotation (rest, or ``base``).

    Args:
        skeleton: the character's Skeleton.
        bone_map: {canonical name: bone name}; bones missing from it are left untouched.
        base: optional (J, 4) WXYZ basis rotations of the starting pose (identity = rest).
    Returns:
        (J, 4) WXYZ quaternions (``matrix_basis`` rotations).
    """
    J = skeleton.num_bones
    base_m = np.tile(np.eye(3), (J, 1, 1)) if base is None else quat_to_matrix(np.asarray(base, np.float64))
    frame = body_frame(skeleton, bone_map, base)
    base_rot, _ = _world_rest(skeleton, base)
    G = global_matrices(skeleton, base)
    inv_map = {v: k for k, v in bone_map.items()}
    targets = _chain_targets(frame)
    basis = np.empty((J, 3, 3))
    new_rot = np.empty((J, 3, 3))
    R_obj = _object_rotation(skeleton)
    for j, p in enumerate(skeleton.parents):
        frame_j = (R_obj if p < 0 else new_rot[p]) @ skeleton.rest_local[j, :3, :3]   # basis = identity
        cur = frame_j @ base_m[j]
        canon = inv_map.get(skeleton.names[j])
        want = cur
        if canon in targets:
            child_canon, target = targets[canon]
            child = bone_map.get(child_canon)
            if child in skeleton.names and child != skeleton.names[j]:
                # child head in this bone's posed frame (intermediate unmapped bones keep their base rotation)
                off = inv(G[j]) @ G[skeleton.index(child)][:, 3]
                d = cur @ off[:3]
            else:
                d = cur[:, 1]
            if np.linalg.norm(d) > 1e-9:
                want = quat_to_matrix(quat_between(d, target)) @ cur
        elif canon in ("left_foot", "right_foot"):
            want = base_rot[j]
        basis[j] = frame_j.T @ want
        new_rot[j] = want
    return matrix_to_quat(basis)


def tpose_world(skeleton: Skeleton, tpose: np.ndarray):
    """World rotations (J, 3, 3) and head positions (J, 3) of the skeleton posed by basis ``tpose`` (J, 4)."""
    return _world_rest(skeleton, tpose)
