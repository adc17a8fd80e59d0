"""Re-proportioning a T-posed destination onto the template's bone lengths before the key-vertex OT
(ReConForM §3.1 transfer; this project's step 3, docs/keyverts.md §3).

Per-bone axial maps blended by skin weights (``reproportion_maps``, ``reproportion_vertices``): the inverse of
``core.body.fit_body_to_skeleton``'s construction, so that bones stretched differently inside one limb (upper
arm vs forearm) no longer shift the limb's mass.
"""

from __future__ import annotations

import numpy as np

from ..rig.humanoid import CANONICAL_BONES, CANONICAL_PARENT, CHAIN_CHILD, TORSO_BONES
from ..rig.parts import bone_canonical
from ..types import Skeleton, SkinnedMesh
from .template import Template, template_labels_areas

#: Range of the axial scale of one bone in the re-proportioning (guards against degenerate rigs).
REPROPORTION_CLAMP = (0.5, 2.0)
#: canonical bone -> the canonical bone whose head ends it (its length), as in core.body.fit_body_to_skeleton;
#: the torso bones share one map (hips -> neck), so their entries are left out
_CHAIN_CHILD = {c: child for c, child in CHAIN_CHILD.items() if c not in TORSO_BONES}


def _foot_width(skeleton: Skeleton, mesh: SkinnedMesh, bone_map: dict, pos, area, side: str):
    """Area-weighted lateral (X) standard deviation of the vertices skinned only to one foot and its toes
    (None when fewer than 10 such vertices)."""
    canon = bone_canonical(skeleton, bone_map)
    sel = np.array([c in (f"{side}_foot", f"{side}_toes") for c in canon])
    m = (mesh.weight_values * sel[mesh.weight_bones]).sum(1) >= 0.999
    if m.sum() < 10 or area[m].sum() <= 0:
        return None
    a, x = area[m], pos[m, 0]
    mu = (a * x).sum() / a.sum()
    return float(np.sqrt((a * (x - mu) ** 2).sum() / a.sum()))



def reproportion_maps(skeleton: Skeleton, mesh: SkinnedMesh, bone_map: dict, heads, pos, area, tpl: Template):
    """Per-bone affine maps that put the T-posed destination on the template's bone lengths.

    The inverse of ``core.body.fit_body_to_skeleton``'s construction. Each canonical bone gets ``x -> L x + t``
    with ``L = I + (k - 1) u u^T``: an axial scale ``k`` along the bone (``u``: head -> head of its canonical
    child), radial directions untouched (the per-limb normalisation removes a uniform radial scale).
    ``k = s l_t / l_c``: the template bone length at the destination's body scale
    ``s = (hips->head + hip->foot)_dest / (same)_template`` (as in the fit) over the destination bone length,
    clamped to ``REPROPORTION_CLAMP``. As in the fit, the four torso bones share one map (hips -> neck), the head
    and chain ends (toes, distal phalanges: their parent's ``L``) get no scale of their own, nor do bones whose
    child is unmapped. Two departures: the shoulder (clavicle) is scaled along the left axis by its span, since
    rigs incline it very differently (a scale along a tilted axis shears the shoulder); the foot is scaled with
    its own width ratio instead of ``s`` (its bone is oblique, so a length scale that disagrees with the foot's
    girth would shear the sole; exact for a stretched template whose feet are unchanged). Translations keep the
    maps continuous at every joint (a child's head goes where its parent's map sends it), except the hips' head
    and the hip joints, which go onto the template's (times ``s``): no bone spans the pelvis, so the legs are
    placed directly, as the fit places them. Bones without a canonical name use their nearest mapped ancestor's
    map (unmapped roots: the torso's).

    Args:
        skeleton, mesh, bone_map: the destination.
        heads: (J,3) bone heads in the shared T-pose, template axes (``tpose_geometry(..., joints=True)``).
        pos: (V,3) T-posed vertices (same axes), area: (V,) their area weights.
        tpl: the Template (its rest pose is the shared T-pose in template axes).
    Returns:
        (J,3,3) linear parts and (J,3) translations per destination bone, or None when the bone map lacks
        hips, head, or a leg.
    """
    tG = tpl.skeleton.rest_global
    tj = {c: tG[i, :3, 3] for i, c in enumerate(tpl.skeleton.names)}
    cj = {c: heads[skeleton.index(b)] for c, b in bone_map.items() if b in skeleton.names and c in tj}
    if not all(c in cj for c in ("hips", "head", "left_upper_leg", "right_upper_leg", "left_foot")):
        return None

    def seg(a, b, p):
        return float(np.linalg.norm(p[a] - p[b]))
    s = (seg("hips", "head", cj) + seg("left_upper_leg", "left_foot", cj)) / \
        (seg("hips", "head", tj) + seg("left_upper_leg", "left_foot", tj))
    lo, hi = REPROPORTION_CLAMP

    def axial(a, b, scale, lateral=False):
        d, dt = cj[b] - cj[a], tj[b] - tj[a]
        if lateral:   # along the template's left axis only: the span, not the rig's inclination
            d, dt = d * [1.0, 0.0, 0.0], dt * [1.0, 0.0, 0.0]
        lc, lt = np.linalg.norm(d), np.linalg.norm(dt)
        if lc < 1e-9 or lt < 1e-9:
            return np.eye(3)
        u = d / lc
        return np.eye(3) + (float(np.clip(scale * lt / lc, lo, hi)) - 1.0) * np.outer(u, u)

    L_torso = axial("hips", "neck" if "neck" in cj else "head", s)
    torso = (L_torso, s * tj["hips"] - L_torso @ cj["hips"])
    maps = {}

    def mapped_parent(c):
        """The map of the nearest canonical ancestor of ``c`` that already has one."""
        p = CANONICAL_PARENT[c]
        while p not in maps:
            p = CANONICAL_PARENT[p]
        return maps[p]
    for c in CANONICAL_BONES:
        if c not in cj:
            continue
        if c in TORSO_BONES:
            maps[c] = torso
            continue
        child = _CHAIN_CHILD.get(c)
        if c.endswith("_foot") and child in cj:
            w_c = _foot_width(skeleton, mesh, bone_map, pos, area, c.split("_")[0])
            w_t = _template_foot_width(tpl, c.split("_")[0])
            L = axial(c, child, s if w_c is None or w_t is None else w_c / w_t)
        elif child is not None:
            L = axial(c, child, s, lateral=c.endswith("_shoulder")) if child in cj else np.eye(3)
        elif c == "head":
            L = np.eye(3)
        else:  # chain ends: the parent's linear part
            L = mapped_parent(c)[0]
        if c in ("left_upper_leg", "right_upper_leg"):
            t = s * tj[c] - L @ cj[c]
        else:
            Lp, tp = mapped_parent(c)
            t = Lp @ cj[c] + tp - L @ cj[c]
        maps[c] = (L, t)
    Ls, ts = np.empty((skeleton.num_bones, 3, 3)), np.empty((skeleton.num_bones, 3))
    for j, c in enumerate(bone_canonical(skeleton, bone_map)):
        while c is not None and c not in maps:
            c = CANONICAL_PARENT.get(c)
        Ls[j], ts[j] = maps[c] if c is not None else torso
    return Ls, ts


def reproportion_vertices(mesh: SkinnedMesh, pos, Ls, ts) -> np.ndarray:
    """(V,3) vertices ``pos`` (V,3) moved by the per-bone maps ``Ls`` (J,3,3), ``ts`` (J,3) blended with the
    mesh's skin weights (vertices without weights stay where they are)."""
    wb, wv = mesh.weight_bones, mesh.weight_values
    wsum = wv.sum(1)
    ok = wsum > 1e-12
    w = wv[ok] / wsum[ok, None]
    L = np.einsum("vk,vkij->vij", w, Ls[wb[ok]])
    out = pos.copy()
    out[ok] = np.einsum("vij,vj->vi", L, pos[ok]) + np.einsum("vk,vki->vi", w, ts[wb[ok]])
    return out


_FOOT_WIDTH = {}


def _template_foot_width(tpl: Template, side: str):
    """``_foot_width`` of the template (cached)."""
    key = (id(tpl.mesh), side)
    if key not in _FOOT_WIDTH:
        _, t_area = template_labels_areas(tpl)
        _FOOT_WIDTH[key] = _foot_width(tpl.skeleton, tpl.mesh, tpl.bone_map, tpl.mesh.rest_verts, t_area, side)
    return _FOOT_WIDTH[key]


__all__ = ["REPROPORTION_CLAMP", "reproportion_maps", "reproportion_vertices"]
