"""Key-vertex robustness report on every character (and skeleton-only motion) of ../shared/assets.

    .venv/bin/python tools/keyverts_report.py [--n 41] [--no-motions] [--synthetic-only]

For each character: import it (the add-on's bridge), detect its bone map (core.bonemap), transfer the key
vertices and check, in the shared T-pose:
  * limb: every key vertex lies on its intended limb (highest summed limb weight);
  * mirror: each left/right pair is symmetric about the body's midplane within 3 % of the height
    (reported: the largest pair asymmetry, % of height, and the number of pairs above 3 %);
  * side: hand and foot key vertices face their intended side (palm down, back of the hand up, sole down,
    ...: vertex normal . template direction > 0), all other key vertices too (reported separately);
  * time: transfer wall time (warm, this machine; the machine is shared and timings are noisy).
Skeleton-only motion files get a fitted template body first (core.body.fit_body_to_skeleton).
A synthetic section covers what the assets lack: several mesh parts, a low-poly body, an asymmetric body.
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
ASSETS = ROOT.parent / "shared" / "assets"
REPO_NAME = "reconform_kvreport"
MODULE = f"bl_ext.{REPO_NAME}.reconform"
HANDFOOT = ("left_hand", "right_hand", "left_foot", "right_foot")


def enable_addon():
    sys.path.insert(0, str(ROOT / "tools"))
    import retarget
    retarget.enable_addon(REPO_NAME)
    return lambda name: importlib.import_module(f"{MODULE}.{name}")


def check(kvmod, humanoid, character, kv, n, base=None):
    """Dict of the checks above for one character and its KeyVertexSet."""
    tpl = kvmod.load_template(n)
    pos, nrm, _ = kvmod.tpose_geometry(character, base)
    lab = kvmod.limb_labels(character.skeleton, character.mesh, character.bone_map)
    H = kvmod.character_height(character, base)
    on_limb = np.array([humanoid.LIMBS[i] if i >= 0 else None for i in lab[kv.vertex_ids]]) == np.array(kv.limbs)
    # midplane: x = the median of the pairs' midpoints (template axes)
    P = pos[kv.vertex_ids]
    idx = {x: i for i, x in enumerate(kv.names)}
    left = [i for i, x in enumerate(kv.names) if x.startswith("left_")]
    mid_x = np.median([(P[i, 0] + P[idx[humanoid.mirror_name(kv.names[i])], 0]) / 2 for i in left])
    asym = np.array([np.linalg.norm((P[i] - [mid_x, 0, 0]) * [-1, 1, 1] + [mid_x, 0, 0]
                                    - P[idx[humanoid.mirror_name(kv.names[i])]]) / H * 100 for i in left])
    facing = (nrm[kv.vertex_ids] * tpl.directions).sum(1) > 0
    hf = np.isin(np.array(kv.limbs), HANDFOOT)
    return {"on_limb": int(on_limb.sum()), "n": len(kv), "asym_max": float(asym.max()), "asym_mean": float(asym.mean()),
            "asym_over3": int((asym > 3).sum()), "pairs": len(left), "side_hf": int(facing[hf].sum()),
            "n_hf": int(hf.sum()), "side_all": int(facing.sum()), "height": H,
            "worst_pair": humanoid.mirror_name(kv.names[left[int(np.argmax(asym))]]).replace("right_", "")}


def row(name, verts, r, dt, note=""):
    return (f"| {name} | {verts} | {r['height']:.2f} | {r['on_limb']}/{r['n']} | {r['asym_max']:.2f} "
            f"({r['worst_pair']}) | {r['asym_over3']}/{r['pairs']} | {r['side_hf']}/{r['n_hf']} | "
            f"{r['side_all']}/{r['n']} | {dt:.2f} | {note} |")


HEADER = ("| character | vertices | h_c m | on limb | max pair asym. % h (pair) | pairs > 3 % | hand/foot side | "
          "all facing | transfer s | notes |\n|---|---|---|---|---|---|---|---|---|---|")


def synthetic(core, n):
    """Rows for generated cases: several parts, low poly, asymmetric."""
    import dataclasses
    body, kvmod, humanoid, types = core("core.body"), core("core.keyverts"), core("core.humanoid"), core("core.types")
    out = []
    tpl = kvmod.load_template(n)
    # low poly: the generator at a coarse grid (~1.5k vertices), A-pose
    sk, m, bm = body.make_body(body.BodyParams(resolution=0.024, name="lowpoly"), pose="A")
    ch = types.Character(sk, m, bm)
    t = time.perf_counter(); kv = kvmod.transfer_keyverts(ch, n); dt = time.perf_counter() - t
    out.append(row("synthetic low-poly (A-pose)", m.num_verts, check(kvmod, humanoid, ch, kv, n), dt))
    # asymmetric: the heavy body with the left arm and leg 25 % thicker and the right hand 15 % larger
    sk, m, bm = body.make_body(body.SHORT_HEAVY, pose="A")
    W = m.dense_weights(sk.num_bones)
    G = sk.rest_global
    v = m.rest_verts.copy()
    for bone, f in (("left_upper_arm", 1.25), ("left_lower_arm", 1.25), ("left_upper_leg", 1.25),
                    ("left_lower_leg", 1.25), ("right_hand", 1.15)):
        j = sk.index(bone)
        h, y = G[j, :3, 3], G[j, :3, 1]
        rel = v - h
        radial = rel - np.outer(rel @ y, y)
        v += (f - 1) * W[:, j:j + 1] * radial
    m2 = dataclasses.replace(m, rest_verts=v, rest_normals=body.vertex_normals(v, m.face_indices, m.face_offsets))
    ch = types.Character(sk, m2, bm)
    t = time.perf_counter(); kv = kvmod.transfer_keyverts(ch, n); dt = time.perf_counter() - t
    out.append(row("synthetic asymmetric (heavy, left limbs +25 %)", m2.num_verts, check(kvmod, humanoid, ch, kv, n),
                   dt, "asymmetry is real here"))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=41)
    ap.add_argument("--no-motions", action="store_true")
    ap.add_argument("--synthetic-only", action="store_true")
    args = ap.parse_args(argv)
    core = enable_addon()
    import bpy
    bridge, bonemap = core("reconform_addon.bridge"), core("core.bonemap")
    kvmod, humanoid, body, types = core("core.keyverts"), core("core.humanoid"), core("core.body"), core("core.types")
    print(f"N = {args.n}\n")
    print(HEADER)
    kvmod.transfer_keyverts(kvmod.load_template(args.n).character, args.n)  # warm-up (imports, template bias)
    files = [] if args.synthetic_only else sorted((ASSETS / "characters").iterdir())
    motions = [] if (args.synthetic_only or args.no_motions) else sorted((ASSETS / "motions").iterdir())
    for path in files + motions:
        if path.suffix.lower() not in (".glb", ".gltf", ".fbx", ".bvh", ".blend"):
            continue
        bpy.ops.wm.read_homefile(use_empty=True)
        objs = bridge.import_file(str(path), report=lambda msg: None)
        arm = bridge.find_armature(objs)
        sk = bridge.read_skeleton(arm)
        res = bonemap.detect_bone_map(sk)
        note, base = "", None
        meshes = bridge.find_meshes(arm)
        if meshes:
            mesh = bridge.read_skinned_mesh(arm, sk, report=lambda msg: None)
            if len(mesh.part_names) > 1:
                note = f"{len(mesh.part_names)} mesh parts"
        else:
            if not core("core.tpose").rest_is_standing(sk, res.bone_map):  # reference frame, as copy_rotations
                clip = bridge.read_motion(arm, sk)
                base = core("core.copy_rotations").reference_basis(types.Character(sk, None, res.bone_map), clip)
            mesh = body.fit_body_to_skeleton(sk, res.bone_map, base=base)
            note = "skeleton only: fitted body" + (" (T-pose from the feet-flat frame: rest not standing)" if base is not None
                                                   else "")
        ch = types.Character(sk, mesh, dict(res.bone_map))
        t = time.perf_counter()
        kv = kvmod.transfer_keyverts(ch, args.n)
        dt = time.perf_counter() - t
        print(row(path.name, mesh.num_verts, check(kvmod, humanoid, ch, kv, args.n, base), dt, note), flush=True)
    for line in synthetic(core, args.n):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
