"""Regenerate core/data/template.npz: the key-vertex template (neutral body in T-pose + N=41 and N=96 sets).

    .venv/bin/python tools/make_template.py [--check]

Each key vertex is defined by a rule on the canonical skeleton (``RULES``): a point on a bone's axis
(head + t * (tail - head) + offset * height) and an outward direction in the template axes (left = +X,
forward = -Y, up = +Z; rules are written for the left side and mirrored). The key vertex is the first
vertex of the intended limb met by that ray. The same rules give ground-truth key vertices on any body from
``core.body`` (tools/keyverts_eval.py uses them to choose the OT read-out and entropy).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.body import BodyParams, make_body  # noqa: E402
from core.humanoid import CANONICAL_BONES, LIMBS, limb_of, mirror_name  # noqa: E402
from core.keyverts import TEMPLATE_PATH, limb_labels  # noqa: E402

_T = np.array([1.0, -0.85, -0.35]) / np.linalg.norm([1.0, -0.85, -0.35])  # thumb direction (left)


def _d(*v):
    v = np.asarray(v, float)
    return v / np.linalg.norm(v)


# name, bone, t along the bone, offset (fraction of height), outward direction; 'left_' rules are mirrored.
CENTER_41 = [
    ("face_center", "head", 0.37, (0, 0, 0), _d(0, -1, 0)),
    ("head_top", "head", 0.45, (0, 0, 0), _d(0, 0, 1)),
    ("head_back", "head", 0.45, (0, 0, 0), _d(0, 1, 0)),
    ("neck_back", "neck", 0.5, (0, 0, 0), _d(0, 1, 0)),
    ("chest", "upper_chest", 0.25, (0, 0, 0), _d(0, -1, 0)),
    ("belly", "spine", 0.3, (0, 0, 0), _d(0, -1, 0)),
    ("upper_back", "upper_chest", 0.3, (0, 0, 0), _d(0, 1, 0)),
    ("lower_back", "spine", 0.5, (0, 0, 0), _d(0, 1, 0)),
    ("pelvis_front", "hips", 0.3, (0, 0, 0), _d(0, -1, 0)),
]
PAIRS_41 = [
    ("buttock", "hips", -0.3, (0.04, 0, 0), _d(0, 1, 0)),
    ("hip_side", "upper_leg", 0.05, (0, 0, 0), _d(1, 0, 0)),
    ("torso_side", "chest", 0.3, (0, 0, 0), _d(1, 0, 0)),
    ("shoulder", "upper_arm", 0.08, (0, 0, 0), _d(0, 0, 1)),
    ("elbow", "lower_arm", 0.0, (0, 0, 0), _d(0, 1, 0)),
    ("palm", "hand", 0.5, (0, 0, 0), _d(0, 0, -1)),
    ("hand_back", "hand", 0.5, (0, 0, 0), _d(0, 0, 1)),
    ("fingertips", "middle_3", 0.5, (0, 0, 0), _d(1, 0, 0)),
    ("thumb_tip", "thumb_3", 0.5, (0, 0, 0), _T),
    ("knee", "lower_leg", 0.0, (0, 0, 0), _d(0, -1, 0)),
    ("thigh_front", "upper_leg", 0.5, (0, 0, 0), _d(0, -1, 0)),
    ("calf", "lower_leg", 0.35, (0, 0, 0), _d(0, 1, 0)),
    ("heel", "foot", 0.0, (0, 0, -0.025), _d(0, 1, -0.3)),
    ("sole", "foot", 0.75, (0, 0, 0), _d(0, 0, -1)),
    ("toe_tip", "toes", 0.6, (0, 0, 0), _d(0, -1, 0)),
    ("foot_top", "foot", 0.5, (0, 0, 0), _d(0, 0, 1)),
]
CENTER_96 = CENTER_41 + [
    ("chin", "head", 0.1, (0, 0, 0), _d(0, -1, -0.2)),
    ("forehead", "head", 0.62, (0, 0, 0), _d(0, -1, 0.2)),
    ("sternum", "upper_chest", 0.6, (0, 0, 0), _d(0, -1, 0)),
    ("sacrum", "hips", 0.5, (0, 0, 0), _d(0, 1, 0)),
    ("crotch", "hips", -0.4, (0, 0, 0), _d(0, 0, -1)),
]
PAIRS_96 = PAIRS_41 + [
    ("cheek", "head", 0.3, (0, 0, 0), _d(0.7, -0.7, 0)),
    ("ear", "head", 0.4, (0, 0, 0), _d(1, 0, 0)),
    ("pectoral", "upper_chest", 0.2, (0.04, 0, 0), _d(0, -1, 0)),
    ("shoulder_blade", "upper_chest", 0.35, (0.045, 0, 0), _d(0, 1, 0)),
    ("belly_side", "spine", 0.4, (0, 0, 0), _d(0.7, -0.7, 0)),
    ("buttock_low", "hips", -0.55, (0.045, 0, 0), _d(0, 1, -0.3)),
    ("upper_arm_top", "upper_arm", 0.5, (0, 0, 0), _d(0, 0, 1)),
    ("upper_arm_under", "upper_arm", 0.5, (0, 0, 0), _d(0, 0, -1)),
    ("upper_arm_front", "upper_arm", 0.5, (0, 0, 0), _d(0, -1, 0)),
    ("forearm_top", "lower_arm", 0.5, (0, 0, 0), _d(0, 0, 1)),
    ("forearm_under", "lower_arm", 0.5, (0, 0, 0), _d(0, 0, -1)),
    ("palm_heel", "hand", 0.15, (0, 0, 0), _d(0, 0, -1)),
    ("finger_pads", "middle_1", 0.5, (0, 0, 0), _d(0, 0, -1)),
    ("index_tip", "index_3", 0.5, (0, 0, 0), _d(1, 0, 0)),
    ("little_tip", "little_3", 0.5, (0, 0, 0), _d(1, 0, 0)),
    ("knuckles", "hand", 0.95, (0, 0, 0), _d(0, 0, 1)),
    ("hand_edge", "hand", 0.5, (0, 0, 0), _d(0, 1, 0)),
    ("thumb_base", "thumb_1", 0.5, (0, 0, 0), _d(0, 0, -1)),
    ("thigh_back", "upper_leg", 0.5, (0, 0, 0), _d(0, 1, 0)),
    ("thigh_inner", "upper_leg", 0.55, (0, 0, 0), _d(-1, 0, 0)),
    ("thigh_outer", "upper_leg", 0.5, (0, 0, 0), _d(1, 0, 0)),
    ("shin", "lower_leg", 0.5, (0, 0, 0), _d(0, -1, 0)),
    ("ankle_outer", "foot", 0.0, (0, 0, 0), _d(1, 0, 0)),
    ("ankle_inner", "foot", 0.0, (0, 0, 0), _d(-1, 0, 0)),
    ("sole_mid", "foot", 0.45, (0, 0, 0), _d(0, 0, -1)),
]


def rule_table(n: int):
    """[(name, bone, t, offset, direction, side)] for N = 41 or 96, centre entries first, then left/right pairs."""
    center, pairs = (CENTER_41, PAIRS_41) if n == 41 else (CENTER_96, PAIRS_96)
    out = [(nm, b, t, np.asarray(o, float), d, "center") for nm, b, t, o, d in center]
    for nm, b, t, o, d in pairs:
        m = np.array([-1.0, 1.0, 1.0])
        lb = f"left_{b}" if f"left_{b}" in CANONICAL_BONES else b
        out.append((f"left_{nm}", lb, t, np.asarray(o, float), d, "left"))
        out.append((f"right_{nm}", mirror_name(lb), t, np.asarray(o, float) * m, d * m, "right"))
    assert len(out) == n, (n, len(out))
    return out


def apply_rules(skeleton, mesh, bone_map, n, positions=None, normals=None, height=None):
    """Vertex id per rule on a canonical-axes body. positions default to the mesh rest vertices (T-pose)."""
    pos = mesh.rest_verts if positions is None else positions
    nrm = mesh.rest_normals if normals is None else normals
    H = float(np.ptp(pos[:, 2])) if height is None else height
    G = skeleton.rest_global
    lab = limb_labels(skeleton, mesh, bone_map)
    edge = np.median(np.linalg.norm(pos[mesh.face_indices[mesh.face_offsets[:-1]]]
                                    - pos[mesh.face_indices[mesh.face_offsets[:-1] + 1]], axis=1))
    ids = []
    for name, bone, t, off, d, _ in rule_table(n):
        j = skeleton.index(bone_map[bone])
        head = G[j, :3, 3]
        kids = skeleton.children(j)
        if bone == "head" or bone.endswith(("_toes", "_3")) or not kids:  # chain ends: nominal length along Y
            length = (0.11 if bone == "head" else 0.04 if bone.endswith("toes") else 0.013) * H
            tail = head + G[j, :3, 1] * length
        else:
            nxt = [c for c in kids if skeleton.names[c] in bone_map.values()]
            child = {v: k for k, v in bone_map.items()}
            want = "middle_1" if bone.endswith("_hand") else None
            pick = [c for c in nxt if want and child.get(skeleton.names[c], "").endswith(want)]
            tail = G[(pick or nxt or kids)[0], :3, 3]
        o = head + t * (tail - head) + off * H
        limb = LIMBS.index(limb_of(bone))
        cand = np.nonzero(lab == limb)[0]
        rel = pos[cand] - o
        s = rel @ d
        perp = np.linalg.norm(rel - s[:, None] * d, axis=1)
        ok = (s > 0) & (perp < 1.5 * edge) & (nrm[cand] @ d > 0.2)
        if not ok.any():
            ok = (s > 0) & (perp < 4 * edge)
        if not ok.any():
            raise RuntimeError(f"rule {name}: no vertex of limb {LIMBS[limb]} along the ray")
        k = np.nonzero(ok)[0]
        best = k[np.argmin(s[k] + 3 * perp[k])]
        ids.append(int(cand[best]))
    return np.array(ids, dtype=np.int64)


def build(params=BodyParams(name="template")):
    skel, mesh, bone_map = make_body(params, pose="T")
    out = {
        "bone_names": np.array(skel.names), "parents": skel.parents.astype(np.int16),
        "rest_local": skel.rest_local.astype(np.float64),
        "verts": mesh.rest_verts.astype(np.float32), "normals": mesh.rest_normals.astype(np.float32),
        "face_indices": mesh.face_indices.astype(np.int32), "face_offsets": mesh.face_offsets.astype(np.int32),
        "weight_bones": mesh.weight_bones.astype(np.int16), "weight_values": mesh.weight_values.astype(np.float32),
    }
    # store float32 geometry; compute key vertices on exactly what will be loaded
    from core.types import SkinnedMesh
    mesh32 = SkinnedMesh(mesh.name, out["verts"].astype(np.float64), out["normals"].astype(np.float64),
                         mesh.face_indices, mesh.face_offsets, mesh.weight_bones,
                         out["weight_values"].astype(np.float64))
    for n in (41, 96):
        rules = rule_table(n)
        ids = apply_rules(skel, mesh32, bone_map, n)
        if len(set(ids.tolist())) != n:
            dup = [r[0] for r, i in zip(rules, ids) if (ids == i).sum() > 1]
            raise RuntimeError(f"N={n}: key vertices collide: {dup}")
        out[f"kv{n}_names"] = np.array([r[0] for r in rules])
        out[f"kv{n}_limbs"] = np.array([limb_of(r[1]) for r in rules])
        out[f"kv{n}_sides"] = np.array([r[5] for r in rules])
        out[f"kv{n}_dirs"] = np.stack([r[4] for r in rules]).astype(np.float64)
        out[f"kv{n}_ids"] = ids
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="rebuild in memory and compare with the stored file")
    args = ap.parse_args(argv)
    out = build()
    if args.check:
        with np.load(TEMPLATE_PATH) as z:
            same = all(np.array_equal(z[k], out[k]) for k in out)
        print("template.npz is up to date" if same else "template.npz differs from a fresh build")
        return 0 if same else 1
    TEMPLATE_PATH.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(TEMPLATE_PATH, **out)
    print(f"wrote {TEMPLATE_PATH.relative_to(ROOT)} ({TEMPLATE_PATH.stat().st_size / 1024:.0f} KiB, "
          f"{len(out['verts'])} vertices, {len(out['face_offsets']) - 1} faces)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
