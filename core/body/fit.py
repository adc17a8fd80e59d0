"""Bodies for skeleton-only characters: the key-vertex template fitted to a skeleton's proportions.

The key vertices of ReConForM §3.1 live on a skinned mesh; a motion source without one (BVH) gets the template
(``core.keyverts.template``) deformed bone by bone onto its T-pose and skinned to its bones
(``fit_body_to_skeleton``). The mesh keeps the template's topology, so the template's key vertices are valid on
it as they are. ``stretch_limbs`` builds known-answer copies of the template for the key-vertex tests.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import CoreError
from ..rig.humanoid import CANONICAL_PARENT, CHAIN_CHILD, FINGERS, TORSO_BONES
from ..keyverts.template import load_template
from ..rig.kinematics import global_matrices
from ..rig.rotations import quat_between, quat_to_matrix
from ..rig.tpose import body_frame, standing_skeleton, tpose_basis
from ..types import Character, Skeleton, SkinnedMesh
from .mesher import vertex_normals


def _tpose_world(skeleton: Skeleton, bone_map: dict, base=None):
    """World-space T-pose of a skeleton: (J,4,4) armature-space globals G_T, world heads (J,3), BodyFrame."""
    q = tpose_basis(skeleton, bone_map, base)
    G = global_matrices(skeleton, q)
    world = (skeleton.object_matrix @ G)[:, :3, 3]
    return G, world, body_frame(skeleton, bone_map, base)


def _axial_map(h_t, t_t, h_s, t_s, s, clamp=(0.35, 3.0)):
    """(4,4) affine map: template bone (h_t->t_t) onto source bone (h_s->t_s), radial scale s."""
    u, w = t_t - h_t, t_s - h_s
    lu, lw = np.linalg.norm(u), np.linalg.norm(w)
    if lu < 1e-9 or lw < 1e-9:
        A = np.eye(4)
        A[:3, :3] *= s
        A[:3, 3] = h_s - s * h_t
        return A
    u, w = u / lu, w / lw
    a = float(np.clip(lw / lu, s * clamp[0], s * clamp[1]))
    D = s * np.eye(3) + (a - s) * np.outer(u, u)
    R = quat_to_matrix(quat_between(u, w))
    A = np.eye(4)
    A[:3, :3] = R @ D
    A[:3, 3] = h_s - A[:3, :3] @ h_t
    return A

def _lower_soles(v: np.ndarray, dominant: np.ndarray, names: tuple, src: dict, lift: dict) -> np.ndarray:
    """``v`` (V, 3) template-axes T-pose vertices (z up, metres) with each foot's sole moved down by ``lift[side]``
    metres (up where negative): a foot vertex (dominant bone the foot or toes) moves by ``lift`` times its depth
    under the ankle joint ``src[side_foot]`` over the sole's (0 at the ankle, 1 at the sole), so the instep
    stays and the sole moves evenly, heel and ball alike."""
    v = v.copy()
    for side, d in lift.items():
        ids = [names.index(f"{side}_{c}") for c in ("foot", "toes") if f"{side}_{c}" in names]
        foot = np.isin(dominant, ids)
        if not d or not foot.any():
            continue
        za = src[f"{side}_foot"][2]
        share = np.clip((za - v[foot, 2]) / max(za - v[foot, 2].min(), 1e-9), 0.0, 1.0)
        v[foot, 2] -= share * d
    return v


def fit_body_to_skeleton(skeleton: Skeleton, bone_map: dict, template=None, base=None,
                         sole_lift: dict = None) -> SkinnedMesh:
    """Give a skeleton-only character a body: the template fitted to its proportions and skinned to it.

    The template (``core.keyverts.load_template``) is deformed bone by bone (affine maps taking each template
    bone onto the source bone in the shared T-pose: axial scale = bone length ratio, radial scale = body
    scale), skinned to the source bones through the bone map (canonical bones it lacks fall back to the nearest
    mapped ancestor) and bound in that T-pose (``SkinnedMesh.bind_global``).
    The mesh keeps the template's topology, so the template key vertices are valid on it as they are.

    Args:
        skeleton: the source Skeleton.
        bone_map: {canonical: bone name}; needs hips, head, both upper arms/legs at least.
        template: the Template to fit (default ``load_template(41)``).
        base: optional (J, 4) WXYZ basis rotations of a standing frame (e.g. the clip's first frame) to build
            the T-pose from, for skeletons whose rest pose is not a standing humanoid (Bandai-Namco BVH);
            without it such a rest pose is only turned upright (``standing_skeleton``).
        sole_lift: optional {side: metres} to move each sole down (``_lower_soles``): how far the soles of the
            body fitted without it stand above the clip's floor where planted (``core.contacts.ground.planted_soles``).
    Returns:
        SkinnedMesh in the skeleton's armature space, bound in the T-pose (its ``rest_verts`` are the T-pose's),
        named '<armature>_fitted_body'.
    """
    if template is None:
        template = load_template(41)
    t_skel, t_mesh = template.skeleton, template.mesh
    names = skeleton.names
    have = {c: skeleton.index(b) for c, b in bone_map.items() if b in names and c in t_skel.names}
    missing = [c for c in ("hips", "head", "left_upper_arm", "right_upper_arm", "left_upper_leg",
                           "right_upper_leg", "left_lower_leg", "right_lower_leg", "left_foot", "right_foot",
                           "left_lower_arm", "right_lower_arm", "left_hand", "right_hand") if c not in have]
    if missing:
        raise CoreError(f"Armature '{skeleton.name}': cannot fit a body, the bone map lacks {', '.join(missing)}; "
                        f"map these bones first.")
    stood = standing_skeleton(skeleton, bone_map) if base is None else skeleton
    G_T, world, frame = _tpose_world(stood, bone_map, base)
    Rc = np.stack([frame.left, -frame.forward, frame.up], 1)  # template frame -> world
    src = {c: Rc.T @ world[j] for c, j in have.items()}       # source joints in template axes
    tG = t_skel.rest_global
    tj = {n: tG[i, :3, 3] for i, n in enumerate(t_skel.names)}

    def seg(a, b, pts):
        return np.linalg.norm(pts[a] - pts[b])
    s = (seg("hips", "head", src) + seg("left_upper_leg", "left_foot", src)) / \
        (seg("hips", "head", tj) + seg("left_upper_leg", "left_foot", tj))
    # fill unmapped canonical joints
    chain = ["hips", "spine", "chest", "upper_chest", "neck", "head"]
    known = [c for c in chain if c in src]
    for c in chain:
        if c in src:
            continue
        lo = max((k for k in known if chain.index(k) < chain.index(c)), key=chain.index)
        hi = min((k for k in known if chain.index(k) > chain.index(c)), key=chain.index)
        f = (tj[c][2] - tj[lo][2]) / max(tj[hi][2] - tj[lo][2], 1e-9)
        src[c] = src[lo] + f * (src[hi] - src[lo])
    for side in ("left", "right"):
        for c, anchor in ((f"{side}_shoulder", f"{side}_upper_arm"), (f"{side}_toes", f"{side}_foot")):
            if c not in src:
                src[c] = src[anchor] + (tj[c] - tj[anchor]) * s
        for f in FINGERS:
            for k in (1, 2, 3):
                c = f"{side}_{f}_{k}"
                if c not in src:
                    par = CANONICAL_PARENT[c]
                    src[c] = src[par] + (tj[c] - tj[par]) * s
    maps = {}
    torso = _axial_map(tj["hips"], tj["neck"], src["hips"], src["neck"], s, clamp=(0.6, 1.8))
    for c in t_skel.names:
        if c in TORSO_BONES:
            maps[c] = torso
        elif c == "head":
            A = np.eye(4)
            A[:3, :3] *= s
            A[:3, 3] = src["head"] - s * tj["head"]
            maps[c] = A
        elif c in CHAIN_CHILD and CHAIN_CHILD[c] in src:
            child = CHAIN_CHILD[c]
            clamp = (0.6, 1.8) if c == "neck" or c.endswith(("_hand", "_foot")) else (0.3, 3.0)
            maps[c] = _axial_map(tj[c], tj[child], src[c], src[child], s, clamp)
        else:  # chain ends (toes, distal finger bones): follow the parent's map, placed at this joint
            par = CANONICAL_PARENT[c]
            A = maps[par].copy()
            A[:3, 3] = src[c] - A[:3, :3] @ tj[c]
            maps[c] = A
    # blend the per-bone maps with the template skin weights (LBS of the template in template space)
    Ms = np.stack([maps[c] for c in t_skel.names])
    wb, wv = t_mesh.weight_bones, t_mesh.weight_values
    blend = (wv[..., None, None] * Ms[wb]).sum(1)                              # (V,4,4)
    v = np.einsum("vij,vj->vi", blend[:, :3, :3], t_mesh.rest_verts) + blend[:, :3, 3]
    if sole_lift:
        dominant = wb[np.arange(len(wb)), np.argmax(wv, axis=1)]
        v = _lower_soles(v, dominant, tuple(t_skel.names), src, sole_lift)
    # template axes -> world -> armature space (T-pose)
    p_world = v @ Rc.T
    inv_obj = np.linalg.inv(stood.object_matrix)
    v_T = p_world @ inv_obj[:3, :3].T + inv_obj[:3, 3]
    # skin weights on the source bones
    target = {}
    for c in t_skel.names:
        a = c
        while a is not None and a not in have:
            a = CANONICAL_PARENT.get(a)
        target[c] = have[a] if a is not None else have["hips"]
    col = np.array([target[c] for c in t_skel.names])
    J = skeleton.num_bones
    W = np.zeros((len(v), J))
    np.add.at(W, (np.repeat(np.arange(len(v)), wb.shape[1]), col[wb].ravel()), wv.ravel())
    K = min(4, J)
    nb = np.argsort(-W, axis=1, kind="stable")[:, :K]
    nv = np.take_along_axis(W, nb, 1)
    nv /= nv.sum(1, keepdims=True)
    # bound in the T-pose it was fitted in (``SkinnedMesh.bind_global``), not brought back to the rest pose by
    # inverse LBS: a rest pose far from a body pose (a Bandai BVH's rest has its legs along its spine, 180° from
    # standing) blends bones whose skinning rotations differ by up to 180°, the blend is near singular, and the
    # inverse put vertices metres away (docs/metrics.md "Fitted bodies")
    fi, fo = t_mesh.face_indices, t_mesh.face_offsets
    return SkinnedMesh(f"{skeleton.name}_fitted_body", v_T, vertex_normals(v_T, fi, fo), fi.copy(), fo.copy(),
                       nb.astype(np.int64), nv, bind_global=G_T, fitted=True)

def stretch_limbs(template, scales: dict) -> Character:
    """A copy of ``template`` (core.keyverts.Template) with arm / leg bones stretched along their axis.

    ``scales``: {canonical bone: factor} (upper/lower arms and legs). Each bone's map scales along the
    direction to its child's head; the maps are blended by the template's skin weights and each child follows
    its parent's map at its head, so the chain stays connected; the skeleton moves with the mesh. Built
    without ``fit_body_to_skeleton``: the known-answer copies of the key-vertex tests and report.
    """
    sk, m = template.skeleton, template.mesh
    G = sk.rest_global
    A, t, heads = np.tile(np.eye(3), (sk.num_bones, 1, 1)), np.zeros((sk.num_bones, 3)), G[:, :3, 3].copy()
    for j, c in enumerate(sk.names):
        p = sk.parents[j]
        if p >= 0:
            heads[j] = A[p] @ G[j, :3, 3] + t[p]
        if c in scales:
            u = G[sk.index(CHAIN_CHILD[c]), :3, 3] - G[j, :3, 3]
            u /= np.linalg.norm(u)
            A[j] = np.eye(3) + (scales[c] - 1.0) * np.outer(u, u)
        t[j] = heads[j] - A[j] @ G[j, :3, 3]
    wb, wv = m.weight_bones, m.weight_values
    v = np.einsum("vk,vkij,vj->vi", wv, A[wb], m.rest_verts) + np.einsum("vk,vki->vi", wv, t[wb])
    G2 = G.copy()
    G2[:, :3, 3] = heads
    rest_local = np.stack([G2[j] if p < 0 else np.linalg.inv(G2[p]) @ G2[j] for j, p in enumerate(sk.parents)])
    mesh = replace(m, rest_verts=v, rest_normals=vertex_normals(v, m.face_indices, m.face_offsets))
    return Character(Skeleton("stretched", sk.names, sk.parents, rest_local), mesh, dict(template.bone_map))


__all__ = ["fit_body_to_skeleton", "stretch_limbs"]
