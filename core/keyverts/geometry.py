"""Key-vertex geometry in the shared T-pose (ReConForM §3.1, steps 1 and 5 of the transfer; h_c of §4.1).

The destination mesh put in the shared T-pose through its bone map and expressed in the template's axes
(left = +X, forward = -Y, up = +Z) (``tpose_geometry``), the area weights ``w_i = Σ_{f∋i} A(f) / n(f)``
(``area_weights``), the body part(s) that may carry key vertices when a character has several mesh objects
(``body_vertex_mask``), the character height h_c (``character_height``) and the midplane of mirrored pairs
(``midplane_x``).
"""

from __future__ import annotations

import numpy as np

from ..rig.affine import inv
from ..errors import CoreError
from ..rig.humanoid import LIMBS, TORSO_BONES
from ..rig.kinematics import forward_kinematics
from ..rig.parts import limb_labels
from ..rig.skinning import skin_mesh
from ..rig.tpose import body_frame, standing_skeleton, tpose_basis
from ..types import Character, KeyVertexSet, Skeleton, SkinnedMesh


def area_weights(verts: np.ndarray, face_indices: np.ndarray, face_offsets: np.ndarray) -> np.ndarray:
    """(V,) ``w_i = Σ_{f ∋ i} A(f) / n(f)`` (fan-triangulated polygon areas; isolated vertices get 0)."""
    sizes = np.diff(face_offsets)
    w = np.zeros(len(verts))
    for n in np.unique(sizes):
        if n < 3:
            continue
        starts = face_offsets[:-1][sizes == n]
        poly = np.stack([face_indices[starts + k] for k in range(n)], 1)
        area = np.zeros(len(poly))
        for k in range(1, n - 1):
            area += 0.5 * np.linalg.norm(np.cross(verts[poly[:, k]] - verts[poly[:, 0]],
                                                  verts[poly[:, k + 1]] - verts[poly[:, 0]]), axis=1)
        for k in range(n):
            np.add.at(w, poly[:, k], area / n)
    return w


def tpose_geometry(character: Character, base=None, joints: bool = False):
    """Destination vertices and normals in the shared T-pose, template axes (metres, world origin).

    Args:
        base: optional (J, 4) basis rotations of a standing frame to build the T-pose from (skeletons whose
            rest pose is not standing); by default the rest pose, turned upright when it lies down.
        joints: also return the (J,3) bone heads in the same T-pose and axes.
    Returns (V,3) positions, (V,3) unit normals, (3,3) Rc (template axes -> world)[, (J,3) bone heads].
    """
    mesh = character.mesh
    sk = standing_skeleton(character.skeleton, character.bone_map) if base is None else character.skeleton
    q = tpose_basis(sk, character.bone_map, base)
    pose = forward_kinematics(sk, q, np.zeros((sk.num_bones, 3)))
    pos, nrm = skin_mesh(sk, mesh, pose)
    pos, nrm = pos.numpy(), nrm.numpy()
    M = sk.object_matrix
    A = M[:3, :3]
    pos_w = pos @ A.T + M[:3, 3]
    nrm_w = nrm @ inv(A)  # inverse-transpose for normals
    nrm_w /= np.maximum(np.linalg.norm(nrm_w, axis=1, keepdims=True), 1e-12)
    fr = body_frame(sk, character.bone_map, base)
    Rc = np.stack([fr.left, -fr.forward, fr.up], 1)
    if joints:
        heads = pose.positions.numpy() @ A.T + M[:3, 3]
        return pos_w @ Rc, nrm_w @ Rc, Rc, heads @ Rc
    return pos_w @ Rc, nrm_w @ Rc, Rc



def body_vertex_mask(mesh: SkinnedMesh, labels: np.ndarray, area: np.ndarray) -> np.ndarray:
    """(V,) bool: vertices eligible for key vertices (body part per limb, see module doc)."""
    parts = np.unique(mesh.part)
    if len(parts) == 1:
        return labels >= 0
    L = len(LIMBS)
    A = np.zeros((len(parts), L))
    for pi, p in enumerate(parts):
        m = (mesh.part == p) & (labels >= 0)
        np.add.at(A[pi], labels[m], area[m])
    total = A.sum()
    covers = (A > 0.02 * A.sum(0, keepdims=True)).sum(1)
    # body: covers most limbs; ties by area
    body = int(np.lexsort((-A.sum(1), -covers))[0])
    mask = np.zeros(len(labels), bool)
    for l in range(L):
        col = A[:, l]
        if col.sum() <= 0:
            continue
        choice = body if col[body] >= 0.25 * col.max() and col[body] > 1e-4 * total else int(np.argmax(col))
        mask |= (mesh.part == parts[choice]) & (labels == l)
    return mask


def character_height(character: Character, base=None) -> float:
    """h_c: height (metres, world) of the character's body mesh in T-pose (body part(s); the paper's character height, ReConForM §4.1).

    ``base``: as in ``tpose_geometry``."""
    if character.mesh is None:
        raise CoreError(f"Character '{character.name}' has no mesh: fit a body first (core.body).")
    pos, _, _ = tpose_geometry(character, base)
    lab = limb_labels(character.skeleton, character.mesh, character.bone_map)
    mask = body_vertex_mask(character.mesh, lab, area_weights(pos, character.mesh.face_indices,
                                                              character.mesh.face_offsets))
    z = pos[mask if mask.any() else slice(None), 2]
    return float(z.max() - z.min())


#: limb -> the canonical bone whose heads (left and right) define the midplane of that limb's mirrored pairs
_PAIR_ROOT = {"arm": "upper_arm", "hand": "upper_arm", "leg": "upper_leg", "foot": "upper_leg"}


def midplane_x(skeleton: Skeleton, bone_map: dict, heads, pos, limb: str = None) -> float:
    """x (template axes) of the body's sagittal plane in the shared T-pose (``heads`` (J,3): bone heads in it).

    For the mirrored pairs of an arm/hand (leg/foot) ``limb``: halfway between the two upper arm (upper leg)
    heads; otherwise, or when one is unmapped: the median x of the mapped torso/neck/head bone heads; without
    any, the median x of the vertices ``pos``. (Per limb because the re-proportioning places the legs on the
    template's hip joints but carries the arms with the torso: a hips bone off the line of the other torso
    joints shifts the arms and not the legs.)
    """
    root = _PAIR_ROOT.get((limb or "").partition("_")[2])
    if root is not None:
        b = [bone_map.get(f"{side}_{root}") for side in ("left", "right")]
        if all(x in skeleton.names for x in b):
            return float(0.5 * (heads[skeleton.index(b[0]), 0] + heads[skeleton.index(b[1]), 0]))
    xs = [heads[skeleton.index(bone_map[c]), 0] for c in TORSO_BONES + ("neck", "head")
          if bone_map.get(c) in skeleton.names]
    return float(np.median(xs)) if xs else float(np.median(pos[:, 0]))


def keyvertex_positions(character: Character, keyverts: KeyVertexSet) -> np.ndarray:
    """(N,3) key-vertex positions in the T-pose, template axes (for reports and checks)."""
    pos, _, _ = tpose_geometry(character)
    return pos[keyverts.vertex_ids]


__all__ = ["area_weights", "body_vertex_mask", "character_height", "keyvertex_positions", "midplane_x",
           "tpose_geometry"]
