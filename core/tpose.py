"""Bring any humanoid into the shared T-pose through its bone map.

The T-pose is the common standard pose of the method (method.md §1.1): arms straight out to the sides,
horizontal; hands in line with the forearms; legs straight down; every other bone as in the rest pose
(feet keep their rest orientation in world space, so soles stay as modelled).
Directions are measured in world space (Z up), so armature objects rotated by importers (FBX Y-up) work.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .errors import CoreError
from .rotations import matrix_to_quat, quat_between, quat_to_matrix
from .types import Skeleton

UP = np.array([0.0, 0.0, 1.0])


class BodyFrame(NamedTuple):
    """Unit world axes of a character: ``left`` (its own left), ``forward`` (where it faces), ``up`` (+Z)."""

    left: np.ndarray
    forward: np.ndarray
    up: np.ndarray


def _world_rest(skeleton: Skeleton):
    G = skeleton.object_matrix @ skeleton.rest_global
    A = skeleton.object_matrix[:3, :3]
    R_obj = A / np.linalg.norm(A, axis=0)
    rot = R_obj @ skeleton.rest_global[:, :3, :3]
    return rot, G[:, :3, 3]


def body_frame(skeleton: Skeleton, bone_map: dict) -> BodyFrame:
    """Character axes from the rest pose: left from the right to the left upper arm (or upper leg)."""
    _, pos = _world_rest(skeleton)
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


def tpose_basis(skeleton: Skeleton, bone_map: dict) -> np.ndarray:
    """Local basis rotations that put ``skeleton`` from its rest pose into the T-pose.

    Args:
        skeleton: the character's Skeleton.
        bone_map: {canonical name: bone name}; bones missing from it are left at rest.
    Returns:
        (J, 4) WXYZ quaternions (``matrix_basis`` rotations; identity for untouched bones).
    """
    frame = body_frame(skeleton, bone_map)
    rest_rot, rest_pos = _world_rest(skeleton)
    rest_g = skeleton.rest_global
    inv_map = {v: k for k, v in bone_map.items()}
    targets = _chain_targets(frame)
    J = skeleton.num_bones
    basis = np.tile(np.eye(3), (J, 1, 1))
    new_rot = np.empty((J, 3, 3))
    A = skeleton.object_matrix[:3, :3]
    R_obj = A / np.linalg.norm(A, axis=0)
    for j, p in enumerate(skeleton.parents):
        local_rest = skeleton.rest_local[j, :3, :3]
        cur = (R_obj @ local_rest) if p < 0 else new_rot[p] @ local_rest
        canon = inv_map.get(skeleton.names[j])
        want = cur
        if canon in targets:
            child_canon, target = targets[canon]
            child = bone_map.get(child_canon)
            if child in skeleton.names:
                # child head in this bone's rest frame (intermediate unmapped bones stay at rest)
                off = np.linalg.inv(rest_g[j]) @ rest_g[skeleton.index(child)][:, 3]
                d = cur @ off[:3]
            else:
                d = cur[:, 1]
            if np.linalg.norm(d) > 1e-9:
                R = quat_to_matrix(quat_between(d, target))
                want = R @ cur
        elif canon in ("left_foot", "right_foot"):
            want = rest_rot[j]
        basis[j] = cur.T @ want
        new_rot[j] = want
    return matrix_to_quat(basis)
