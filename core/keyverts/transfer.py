"""Key-vertex transfer: the template's N key vertices placed on any character (ReConForM §3.1).

``transfer_keyverts`` runs, per limb, the steps described in ``core.keyverts`` (T-pose, limb split,
re-proportioning, normalisation, area weights, entropic OT, read-out, joint read-out of mirrored pairs);
``_transfer`` shares one OT solve between several read-outs (tools/experiments/keyverts_eval.py). The template ->
template OT that measures the entropic map's own shrinkage is solved once per limb and settings (``_self_bias``).
"""

from __future__ import annotations

import numpy as np

from ..errors import CoreError
from ..rig.humanoid import LIMBS, mirror_name
from ..rig.parts import limb_labels
from ..types import Character, KeyVertexSet
from .geometry import area_weights, body_vertex_mask, midplane_x, tpose_geometry
from .ot import DEFAULT_MAX_POINTS, DEFAULT_REG, _normalize, _readout, ot_limb, pair_readout, plan_rows
from .reproportion import reproportion_maps, reproportion_vertices
from .template import Template, load_template, template_labels_areas

#: Read-out of one destination vertex per template key vertex: 'snap_normal' | 'barycentric' | 'argmax'.
DEFAULT_READOUT = "snap_normal"
#: Per-limb normalisation: 'axis' (zero mean, unit variance per axis) or 'iso' (one scale).
DEFAULT_NORMALIZE = "axis"
#: Re-proportion the destination onto the template's bone lengths before the OT (docs/keyverts.md §3).
DEFAULT_REPROPORTION = True
#: Weight λ of the pair asymmetry in the joint read-out of mirrored key vertices (0: each side on its own;
#: chosen by measurement, docs/keyverts.md §3, "Mirrored pairs").
DEFAULT_MIRROR = 1.0
#: Candidate vertices per side in the joint read-out of a mirrored pair (the nearest facing ones).
MIRROR_CANDIDATES = 8


def transfer_keyverts(character: Character, n: int = 41, locked: KeyVertexSet = None, *, reg: float = None,
                      readout: str = None, normalize: str = None, max_points: int = None,
                      template: Template = None, shortcut: bool = True, reproportion: bool = None,
                      mirror: float = None) -> KeyVertexSet:
    """Place the template's N key vertices on a character's mesh (ReConForM §3.1).

    Args:
        character: skeleton, mesh (any rest pose; T-posed through ``bone_map``) and bone map.
        n: 41 or 96.
        locked: a previous KeyVertexSet; its entries with ``locked`` True are kept as they are.
        reg, readout, normalize, max_points: override the measured defaults (docs/keyverts.md).
        template: use another template (tests); default ``load_template(n)``.
        shortcut: a mesh with the template's own topology (a fitted body) gets the template's vertex ids
            directly (exact); False runs the OT anyway (tests of the transfer itself).
        reproportion: re-proportion onto the template's bone lengths first (default ``DEFAULT_REPROPORTION``).
        mirror: weight λ of the joint read-out of mirrored pairs (default ``DEFAULT_MIRROR``; 0: each key
            vertex on its own).
    Returns:
        KeyVertexSet with the template's names and limbs, vertex ids into ``character.mesh``.
    """
    if character.mesh is None:
        raise CoreError(f"Character '{character.name}' has no mesh: give it a body first "
                        f"(core.body.fit_body_to_skeleton).")
    readout = DEFAULT_READOUT if readout is None else readout
    return _transfer(character, n, locked, reg, (readout,), normalize, max_points, template,
                     shortcut=shortcut, reproportion=reproportion, mirror=mirror)[readout]


def _unskinned(character: Character, limb: str) -> CoreError:
    return CoreError(f"Character '{character.name}': no mesh vertex is skinned to its {limb.replace('_', ' ')} "
                     f"(check the bone map and the skin weights).")


def check_skinned_limbs(character: Character, n: int = 41, locked: KeyVertexSet = None) -> None:
    """Raise the CoreError ``transfer_keyverts(character, n, locked)`` would raise for a limb whose key vertices
    it places while no vertex of ``character.mesh`` is skinned to it (``core.rig.parts.limb_labels``): in
    milliseconds, before any OT."""
    kv = load_template(n).keyverts
    kept = set()
    if locked is not None:
        kept = {nm for nm, lk, vid in zip(locked.names, locked.locked, locked.vertex_ids)
                if lk and 0 <= vid < character.mesh.num_verts}
    present = set(np.unique(limb_labels(character.skeleton, character.mesh, character.bone_map)).tolist())
    for limb in dict.fromkeys(lb for nm, lb in zip(kv.names, kv.limbs) if nm not in kept):
        if LIMBS.index(limb) not in present:
            raise _unskinned(character, limb)


def _transfer(character, n, locked, reg, readouts, normalize, max_points, template, debias=True, shortcut=True,
              reproportion=None, mirror=None):
    """transfer_keyverts for several read-outs sharing one OT solve: {readout: KeyVertexSet}."""
    repro = DEFAULT_REPROPORTION if reproportion is None else reproportion
    lam = DEFAULT_MIRROR if mirror is None else float(mirror)
    reg = DEFAULT_REG if reg is None else reg
    normalize = DEFAULT_NORMALIZE if normalize is None else normalize
    max_points = DEFAULT_MAX_POINTS if max_points is None else max_points
    tpl = load_template(n) if template is None else template
    kv = tpl.keyverts
    mesh = character.mesh
    ids = {r: np.full(len(kv), -1, dtype=np.int64) for r in readouts}
    lock = np.zeros(len(kv), bool)
    if locked is not None:
        by_name = {nm: i for i, nm in enumerate(locked.names)}
        for k, nm in enumerate(kv.names):
            i = by_name.get(nm)
            if i is not None and locked.locked[i] and 0 <= locked.vertex_ids[i] < mesh.num_verts:
                lock[k] = True
                for r in readouts:
                    ids[r][k] = locked.vertex_ids[i]
    if shortcut and mesh.num_verts == tpl.mesh.num_verts and np.array_equal(mesh.face_indices, tpl.mesh.face_indices) \
            and np.array_equal(mesh.face_offsets, tpl.mesh.face_offsets):
        # the template's own topology (a fitted body, core.body.fit_body_to_skeleton): the answer is known
        for r in readouts:
            ids[r][~lock] = kv.vertex_ids[~lock]
        return {r: KeyVertexSet(kv.names, kv.limbs, ids[r], lock, kv.eye) for r in readouts}
    pos, nrm, _, heads = tpose_geometry(character, joints=True)
    lab = limb_labels(character.skeleton, mesh, character.bone_map)
    area = area_weights(pos, mesh.face_indices, mesh.face_offsets)
    eligible = body_vertex_mask(mesh, lab, area)
    idx = {nm: k for k, nm in enumerate(kv.names)}
    paired = np.array([lam > 0 and not lock[k] and mirror_name(nm) != nm and mirror_name(nm) in idx
                       and not lock[idx[mirror_name(nm)]] for k, nm in enumerate(kv.names)])
    cands, scale2 = {r: {} for r in readouts if r != "argmax"}, {}
    maps = reproportion_maps(character.skeleton, mesh, character.bone_map, heads, pos, area, tpl) if repro else None
    if maps is not None:
        pos = reproportion_vertices(mesh, pos, *maps)
        area = area_weights(pos, mesh.face_indices, mesh.face_offsets)
        heads = np.einsum("jab,jb->ja", maps[0], heads) + maps[1]
    else:   # a pair's asymmetry means something only where both sides have the template's bone lengths
        paired[:] = False
    t_lab, t_area = template_labels_areas(tpl)
    for li, limb in enumerate(LIMBS):
        ks = [k for k in range(len(kv)) if kv.limbs[k] == limb and not lock[k]]
        if not ks:
            continue
        dm = np.nonzero(eligible & (lab == li))[0]
        if len(dm) == 0:
            dm = np.nonzero(lab == li)[0]
        if len(dm) == 0:
            raise _unskinned(character, limb)
        tm = np.nonzero(t_lab == li)[0]
        wt, wd = t_area[tm], area[dm]
        if wd.sum() <= 0:
            wd = np.ones(len(dm))
        xt = _normalize(tpl.mesh.rest_verts[tm], wt / wt.sum(), normalize)
        xd = _normalize(pos[dm], wd / wd.sum(), normalize)
        res = ot_limb(xt, wt, xd, wd, reg=reg, max_points=max_points)
        local = np.searchsorted(tm, kv.vertex_ids[ks])
        bias = _self_bias(tpl, li, normalize, reg, max_points, local) if debias else None
        pk = paired[ks]
        if pk.any():   # squared length (mean variance of the limb) turning metres into its normalised units
            w = wd / wd.sum()
            mu = (w[:, None] * pos[dm]).sum(0)
            scale2[li] = float((w[:, None] * (pos[dm] - mu) ** 2).sum(0).mean())
        for r in readouts:
            if r in cands and pk.any():
                c, d2 = _readout(res, xt[local], xd, wd, nrm[dm], tpl.directions[ks], r, bias,
                                 candidates=MIRROR_CANDIDATES)
                ids[r][ks] = dm[c[:, 0]]
                for j in np.nonzero(pk)[0]:
                    cands[r][ks[j]] = (dm[c[j]], d2[j], li)
            else:
                ids[r][ks] = dm[_readout(res, xt[local], xd, wd, nrm[dm], tpl.directions[ks], r, bias)]
    for r, cr in cands.items():   # mirrored pairs read out jointly (pair_readout)
        for k in sorted(cr):
            if not kv.names[k].startswith("left_"):
                continue
            km = idx[mirror_name(kv.names[k])]
            (cl, dl, ll), (cm, dr, lr) = cr[k], cr[km]
            mid = midplane_x(character.skeleton, character.bone_map, heads, pos, LIMBS[ll])  # re-proportioned
            ids[r][k], ids[r][km] = pair_readout(cl, dl, cm, dr, pos, mid, 0.5 * (scale2[ll] + scale2[lr]), lam)
    return {r: KeyVertexSet(kv.names, kv.limbs, ids[r], lock, kv.eye) for r in readouts}


_BIAS = {}


def _self_bias(tpl: Template, li: int, normalize: str, reg: float, max_points: int, local) -> np.ndarray:
    """(K, 3) entropic-map shrinkage T_tt(x) - x of template limb ``li``'s vertices ``local`` (indices into
    the limb), from the template -> template OT (solved once per limb and settings, cached)."""
    key = (id(tpl.mesh), li, normalize, float(reg), int(max_points))
    t_lab, t_area = template_labels_areas(tpl)
    tm = np.nonzero(t_lab == li)[0]
    wt = t_area[tm]
    xt = _normalize(tpl.mesh.rest_verts[tm], wt / wt.sum(), normalize)
    if key not in _BIAS:
        _BIAS[key] = ot_limb(xt, wt, xt, wt, reg=reg, max_points=max_points)
    res = _BIAS[key]
    return plan_rows(res, xt[local]) @ res["cd"] - xt[local]


__all__ = ["DEFAULT_MIRROR", "DEFAULT_NORMALIZE", "DEFAULT_READOUT", "DEFAULT_REPROPORTION", "MIRROR_CANDIDATES",
           "transfer_keyverts"]
