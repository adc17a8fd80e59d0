"""Which of a character's mesh objects form its body (props, clothing and eyes do not).

A character's ``SkinnedMesh`` merges every mesh object its armature moves (``SkinnedMesh.part``, ``part_names``).
Most are the body: one mesh, or the separate rigid parts of a robot. Others are worn or held: a shirt over the
body, eyes in the head, a sword in a hand. Key vertices belong on the body (the paper's transfer misplaces them on
accessories, ReConForM §5.4), and h_c, the solver's soles and the metrics are about the body too, so
``choose_body`` sorts the parts, in the rest pose (armature space), with ``size`` = the largest extent of the
rig's bone heads (about its height):

- **over or inside another part** (clothing, a helmet, eyes, teeth): at least ``OVERLAY_SHARE`` of its area lies
  within ``NEAR`` × size of the other part's surface and off it along its normal (not beside its end, as a
  neighbouring part is), either just outside it and facing the same way (normals within 60°: a surface laid
  over another) or just under it; more than the other way round (when both lie on each other, the outer one
  dresses the inner one);
- **a prop** (a sword, a shield): held rigidly by one bone (every vertex entirely on it), at least ``PROP_SHARE``
  of its area farther than ``REACH`` × size from every bone of the rig, on a limb another part covers too (a
  robot's head or a creature's big head are the only parts of their limbs: never props);
- **the body**: every other part.

A choice by the user ({part name: True to use it, False to leave it out}: the panel's Meshes list, a set-up's
``meshes`` / ``exclude_meshes``) wins over this reading. ``submesh`` keeps the chosen parts.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import numpy as np

from ..errors import CoreError
from ..keyverts.geometry import area_weights
from ..rig.parts import limb_labels
from ..types import KeyVertexSet, Skeleton, SkinnedMesh

NEAR = 0.03            #: a vertex lies on another part within this share of the rig's size (5 cm at 1.8 m)
OVERLAY_SHARE = 0.6    #: share of a part's area lying on another part that makes it clothing / an inner part
REACH = 0.12           #: a prop's vertices lie farther than this share of the rig's size from every bone
PROP_SHARE = 0.5       #: ... for at least this share of its area
_MAX_POINTS = 2500     #: vertices per part tested (uniform stride) and surface samples per part


class BodyChoice(NamedTuple):
    """``choose_body``'s answer: ``used`` part names (the body), ``left_out`` {part name: why}, in part order."""

    used: tuple
    left_out: dict

    def note(self, name: str) -> str:
        """One line for the user, or '' when every mesh is used."""
        if not self.left_out:
            return ""
        out = "; ".join(f"'{n}' ({why})" for n, why in self.left_out.items())
        return (f"'{name}': body from {', '.join(repr(n) for n in self.used)}; left out {out}. Choose in the "
                "panel's Meshes list or the set-up's \"meshes\" / \"exclude_meshes\".")


def _surface_points(verts, tris, area_tris, count, rng):
    """``count`` points spread over the triangles ``tris`` (indices into ``verts``) by area, and the unit normal
    of the triangle each lies on: ((count, 3), (count, 3))."""
    k = rng.choice(len(tris), size=count, p=area_tris / area_tris.sum())
    r1, r2 = rng.random(count), rng.random(count)
    s = np.sqrt(r1)
    a, b, c = verts[tris[k, 0]], verts[tris[k, 1]], verts[tris[k, 2]]
    n = np.cross(b - a, c - a)
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-18)
    return (1 - s)[:, None] * a + (s * (1 - r2))[:, None] * b + (s * r2)[:, None] * c, n


def _nearest(points, cloud):
    """(distance, index into ``cloud``) of each of ``points``'s nearest cloud point (brute force in blocks,
    |p|² + |c|² − 2 p·c)."""
    d = np.empty(len(points))
    idx = np.empty(len(points), np.int64)
    points, cloud = np.asarray(points, np.float32), np.asarray(cloud, np.float32)
    c2 = (cloud * cloud).sum(-1)
    step = max(1, 2 ** 22 // max(len(cloud), 1))
    for s in range(0, len(points), step):
        p = points[s:s + step]
        sq = (p * p).sum(-1)[:, None] + c2[None] - 2.0 * p @ cloud.T
        idx[s:s + step] = sq.argmin(1)
        d[s:s + step] = np.sqrt(np.maximum(sq[np.arange(len(sq)), idx[s:s + step]], 0.0))
    return d, idx


def _segment_distance(points, a, b):
    """(P,) distance of each point to the nearest of the segments a (S, 3) -> b (S, 3)."""
    out = np.full(len(points), np.inf)
    ab = b - a
    L2 = np.maximum((ab * ab).sum(-1), 1e-18)
    for s in range(0, len(points), 1024):
        p = points[s:s + 1024, None, :]
        t = np.clip(((p - a) * ab).sum(-1) / L2, 0.0, 1.0)
        out[s:s + 1024] = np.linalg.norm(p - (a + t[..., None] * ab), axis=-1).min(1)
    return out


def classify_parts(skeleton: Skeleton, mesh: SkinnedMesh, bone_map: dict) -> dict:
    """{part name: '' for the body, or why it is not}: the automatic reading of the module docstring."""
    P = len(mesh.part_names)
    if P == 1:
        return {mesh.part_names[0]: ""}
    heads = skeleton.rest_global[:, :3, 3]
    size = max(float(np.ptp(heads, axis=0).max()), 1e-6)
    verts = mesh.rest_verts
    area = area_weights(verts, mesh.face_indices, mesh.face_offsets)
    tris = mesh.triangles()
    tri_area = 0.5 * np.linalg.norm(np.cross(verts[tris[:, 1]] - verts[tris[:, 0]],
                                             verts[tris[:, 2]] - verts[tris[:, 0]]), axis=1) if len(tris) else None
    rng = np.random.default_rng(0)
    ids, clouds, boxes = [], [], []
    for p in range(P):
        v = np.nonzero(mesh.part == p)[0]
        ids.append(v[::max(1, int(np.ceil(len(v) / _MAX_POINTS)))])
        own = np.isin(tris[:, 0], v) if len(tris) else np.zeros(0, bool)
        surface = own.any() and tri_area[own].sum() > 0
        clouds.append(_surface_points(verts, tris[own], tri_area[own], 2 * _MAX_POINTS, rng) if surface
                      else (verts[ids[-1]], mesh.rest_normals[ids[-1]]))
        boxes.append((verts[v].min(0), verts[v].max(0)) if len(v) else (np.zeros(3), np.zeros(3)))
    near = NEAR * size
    share = np.zeros((P, P))        # area share of part a lying over or inside part b
    over = np.zeros((P, P))         # ... of which over it (outside, facing the same way) rather than inside
    for a in range(P):
        w = area[ids[a]]
        if not len(w) or w.sum() <= 0:
            continue
        pa, na = verts[ids[a]], mesh.rest_normals[ids[a]]
        for b in range(P):
            if a == b or np.any(boxes[a][0] > boxes[b][1] + near) or np.any(boxes[b][0] > boxes[a][1] + near):
                continue
            cloud, cloud_n = clouds[b]
            d, k = _nearest(pa, cloud)
            nb = cloud_n[k]
            side = ((pa - cloud[k]) * nb).sum(-1)        # along b's normal there: + outside, - inside
            # lying on b: off its surface along its normal (not beside its end, as a neighbouring part is)
            on = (d < near) & (np.abs(side) >= 0.5 * d)
            is_over = on & (side >= 0) & ((na * nb).sum(-1) > 0.5)   # outside and facing the same way: clothing
            is_in = on & (side < 0)                                   # just under b's surface: eyes, teeth
            share[a, b] = float(w[is_over | is_in].sum() / w.sum())
            over[a, b] = float(w[is_over].sum() / w.sum())
    out = {}
    for a in range(P):
        why = ""
        for b in np.argsort(-share[a]):
            if share[a, b] < OVERLAY_SHARE:
                break
            # when both lie on each other (a full suit on a body), the one over the other dresses it
            if share[b, a] < OVERLAY_SHARE or over[a, b] > over[b, a]:
                why = f"lies {'over' if 2 * over[a, b] >= share[a, b] else 'inside'} '{mesh.part_names[b]}'"
                break
        out[mesh.part_names[a]] = why
    # props: rigid, far from the skeleton, on a limb another kept part covers
    labels = limb_labels(skeleton, mesh, bone_map)
    seg = [(int(p), j) for j, p in enumerate(skeleton.parents) if p >= 0]
    a_pts = heads[[p for p, _ in seg]] if seg else heads[:1]
    b_pts = heads[[j for _, j in seg]] if seg else heads[:1]
    for p in range(P):
        name = mesh.part_names[p]
        v = ids[p]
        if out[name] or not len(v):
            continue
        top = mesh.weight_values[v].argmax(1)
        bone = mesh.weight_bones[v, top]
        if not (np.all(mesh.weight_values[v, top] > 0.999) and np.all(bone == bone[0])):
            continue
        w = area[v]
        far = _segment_distance(verts[v], a_pts, b_pts) > REACH * size
        if w.sum() <= 0 or w[far].sum() / w.sum() < PROP_SHARE:
            continue
        limb = np.bincount(labels[v][labels[v] >= 0]).argmax() if (labels[v] >= 0).any() else -1
        others = [q for q in range(P) if q != p and not out[mesh.part_names[q]]]
        if limb >= 0 and any(np.count_nonzero((mesh.part == q) & (labels == limb)) >= 10 for q in others):
            metres = skeleton.metres_per_unit
            reach = float(_segment_distance(verts[v], a_pts, b_pts).max()) * metres
            out[name] = (f"held by bone '{skeleton.names[int(bone[0])]}', reaching {reach:.2f} m from the skeleton: "
                         "a prop")
    return out


def choose_body(skeleton: Skeleton, mesh: SkinnedMesh, bone_map: dict, choice: dict = None) -> BodyChoice:
    """The parts that form the body: the user's ``choice`` ({part name: bool}) where given, else the automatic
    reading (``classify_parts``). Raises CoreError naming the armature when nothing is left."""
    choice = dict(choice or {})
    unknown = sorted(set(choice) - set(mesh.part_names))
    if unknown:
        raise CoreError(f"Armature '{skeleton.name}' moves no mesh named {', '.join(repr(n) for n in unknown)} "
                        f"(its meshes: {', '.join(repr(n) for n in mesh.part_names)}).")
    auto = classify_parts(skeleton, mesh, bone_map) if not all(n in choice for n in mesh.part_names) else {}
    used, left = [], {}
    for n in mesh.part_names:
        if choice.get(n, not auto.get(n)):
            used.append(n)
        else:
            left[n] = "left out by the user" if n in choice else auto[n]
    if not used:
        raise CoreError(f"Armature '{skeleton.name}': every mesh is left out ({', '.join(mesh.part_names)}); "
                        "include its body in the panel's Meshes list or the set-up's \"meshes\".")
    return BodyChoice(tuple(used), left)


def submesh(mesh: SkinnedMesh, used) -> tuple:
    """(the SkinnedMesh of the parts named in ``used``, (V,) int64 new index of each old vertex or -1)."""
    keep_parts = [p for p, n in enumerate(mesh.part_names) if n in set(used)]
    if len(keep_parts) == len(mesh.part_names):
        return mesh, np.arange(mesh.num_verts)
    keep = np.isin(mesh.part, keep_parts)
    new = np.full(mesh.num_verts, -1, np.int64)
    new[keep] = np.arange(int(keep.sum()))
    sizes = mesh.face_sizes
    face_keep = keep[mesh.face_indices[mesh.face_offsets[:-1]]]
    fi = new[np.concatenate([mesh.face_indices[s:e] for s, e, k in
                             zip(mesh.face_offsets[:-1], mesh.face_offsets[1:], face_keep) if k] or
                            [np.zeros(0, np.int64)])]
    fo = np.concatenate([[0], np.cumsum(sizes[face_keep])]).astype(np.int64)
    part_map = {p: k for k, p in enumerate(keep_parts)}
    part = np.array([part_map[p] for p in mesh.part[keep]], np.int64)
    return replace(mesh, name="+".join(mesh.part_names[p] for p in keep_parts), rest_verts=mesh.rest_verts[keep],
                   rest_normals=mesh.rest_normals[keep], face_indices=fi, face_offsets=fo,
                   weight_bones=mesh.weight_bones[keep], weight_values=mesh.weight_values[keep], part=part,
                   part_names=tuple(mesh.part_names[p] for p in keep_parts)), new


def remap_keyverts(keyverts: KeyVertexSet, new_index: np.ndarray):
    """``keyverts`` with vertex ids through ``new_index`` (``submesh``); ids on parts left out become -1, so a
    set that had any is no longer usable as stored (its locked entries elsewhere are kept by a new transfer)."""
    if keyverts is None:
        return None
    ids = keyverts.vertex_ids
    valid = (ids >= 0) & (ids < len(new_index))
    out = np.full(len(ids), -1, np.int64)
    out[valid] = new_index[ids[valid]]
    return replace(keyverts, vertex_ids=out)


__all__ = ["BodyChoice", "NEAR", "OVERLAY_SHARE", "PROP_SHARE", "REACH", "choose_body", "classify_parts",
           "remap_keyverts", "submesh"]
