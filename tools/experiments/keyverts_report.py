"""Key-vertex robustness report on every character (and skeleton-only motion) of ../shared/assets.

    .venv/bin/python tools/experiments/keyverts_report.py [--n 41] [--no-motions] [--synthetic-only] [--sweep]
    .venv/bin/python tools/experiments/keyverts_report.py --known
    .venv/bin/python tools/experiments/keyverts_report.py --lambdas 0,0.1,0.3,1,3,10

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
--known: the known-answer cases instead (no add-on needed): copies of the template whose right answer is the
template's own vertex ids, transferred through the OT (shortcut off), with the re-proportioning off and on.
--sweep: the mirror check on every character with a mesh again, over 15 settings around the defaults
(entropy x 0.8 .. 1.25, 250 / 300 / 350 OT atoms), with each key vertex read out on its own (mirror=0, the
read-out before the joint read-out of mirrored pairs) and with the default joint read-out: a pair whose two
candidate vertices are nearly equidistant from the read-out point flips with any small change, so one setting
alone cannot tell a method change from such a flip.
--lambdas: the table that chose λ of the joint read-out of mirrored pairs (``lambda_table``).
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
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
    body, kvmod, humanoid, types = core("core.body"), core("core.keyverts"), core("core.rig.humanoid"), core("core.types")
    out = []
    # low poly: the generator at a coarse grid (~1.5k vertices), A-pose
    sk, m, bm = body.make_body(body.BodyParams(resolution=0.024, name="lowpoly"), pose="A")
    ch = types.Character(sk, m, bm)
    t = time.perf_counter(); kv = kvmod.transfer_keyverts(ch, n); dt = time.perf_counter() - t
    out.append(row("synthetic low-poly (A-pose)", m.num_verts, check(kvmod, humanoid, ch, kv, n), dt))
    # asymmetric: the heavy body with the left arm and leg 25 % thicker and the right hand 15 % larger
    ch = thickened(body, types, body.SHORT_HEAVY, "A", ASYMMETRIC[0][3])
    t = time.perf_counter(); kv = kvmod.transfer_keyverts(ch, n); dt = time.perf_counter() - t
    out.append(row("synthetic asymmetric (heavy, left limbs +25 %)", ch.mesh.num_verts,
                   check(kvmod, humanoid, ch, kv, n), dt, "asymmetry is real here"))
    return out


#: asymmetric generated bodies: (label, BodyParams keywords or None for SHORT_HEAVY, pose, {bone: radial factor})
ASYMMETRIC = (("heavy, left arm and leg +25 %, right hand +15 %", None, "A",
               {"left_upper_arm": 1.25, "left_lower_arm": 1.25, "left_upper_leg": 1.25, "left_lower_leg": 1.25,
                "right_hand": 1.15}),
              ("neutral, left arm +40 %, right leg +20 %", {}, "A",
               {"left_upper_arm": 1.4, "left_lower_arm": 1.4, "right_upper_leg": 1.2, "right_lower_leg": 1.2}),
              ("muscular, right arm +30 %, left hand +20 %",
               dict(limb_thickness=1.3, torso_width=1.15, shoulder_width=1.15, chest=1.3), "T",
               {"right_upper_arm": 1.3, "right_lower_arm": 1.3, "left_hand": 1.2}))


def thickened(body, types, params, pose, factors):
    """A generated body (``params``, rest ``pose``) with bones thickened radially ({bone: factor}, blended by
    its skin weights): an asymmetric mesh on a symmetric skeleton. Returns a Character."""
    import dataclasses
    sk, m, bm = body.make_body(params, pose=pose)
    W, G, v = m.dense_weights(sk.num_bones), sk.rest_global, m.rest_verts.copy()
    for bone, f in factors.items():
        j = sk.index(bone)
        h, y = G[j, :3, 3], G[j, :3, 1]
        rel = v - h
        v += (f - 1) * W[:, j:j + 1] * (rel - np.outer(rel @ y, y))
    m2 = dataclasses.replace(m, rest_verts=v, rest_normals=body.vertex_normals(v, m.face_indices, m.face_offsets))
    return types.Character(sk, m2, bm)


def stretched_copy(tpl, scales):
    """The template with arm / leg bones stretched along their axis (core.body.stretch_limbs)."""
    from core.body import stretch_limbs
    return stretch_limbs(tpl, scales)


def known_answers():
    """Print the known-answer table: exact key vertices / N through the OT, re-proportioning off and on."""
    sys.path.insert(0, str(ROOT))
    from core.body import BodyParams, fit_body_to_skeleton, make_body
    from core.keyverts import load_template, transfer_keyverts
    from core.types import Character, Skeleton
    cases = []
    t41 = load_template(41)
    sk = t41.skeleton
    c, s = np.cos(0.7), np.sin(0.7)
    M = np.array([[1.4 * c, -1.4 * s, 0, 3.0], [1.4 * s, 1.4 * c, 0, -2.0], [0, 0, 1.4, 0.3], [0, 0, 0, 1]])
    cases.append(("template itself", lambda t: t.character))
    cases.append(("template x1.4, turned, moved", lambda t: Character(
        Skeleton("moved", sk.names, sk.parents, sk.rest_local, M), t.mesh, t.bone_map)))
    for label, kw, pose in (("fitted: template skeleton, A-pose rest", {}, "A"),
                            ("fitted: arms 1.3, legs 1.25, T", dict(arm_length=1.3, leg_length=1.25), "T"),
                            ("fitted: arms 1.3, legs 1.25, A", dict(arm_length=1.3, leg_length=1.25), "A"),
                            ("fitted: arms 0.85, legs 1.1, T", dict(arm_length=0.85, leg_length=1.1), "T"),
                            ("fitted: arms 0.85, legs 1.1, A", dict(arm_length=0.85, leg_length=1.1), "A"),
                            ("fitted: 1.5 m, arms 1.2, legs 0.9, A", dict(height=1.5, arm_length=1.2, leg_length=0.9),
                             "A"),
                            ("fitted: 1.95 m, arms 0.9, legs 1.15, T",
                             dict(height=1.95, arm_length=0.9, leg_length=1.15), "T")):
        skb, _, bm = make_body(BodyParams(name="known", **kw), pose=pose)
        ch = Character(skb, fit_body_to_skeleton(skb, bm), bm)
        cases.append((label, lambda t, ch=ch: ch))
    for label, f in (("stretched: upper arm 1.3, forearm 1.3", {"upper_arm": 1.3, "lower_arm": 1.3}),
                     ("stretched: arm 1.4 / 1.1, leg 1.2 / 1.3",
                      {"upper_arm": 1.4, "lower_arm": 1.1, "upper_leg": 1.2, "lower_leg": 1.3}),
                     ("stretched: upper arm 0.85, leg 1.1 / 0.9",
                      {"upper_arm": 0.85, "upper_leg": 1.1, "lower_leg": 0.9})):
        cases.append((label, lambda t, f=f: stretched_copy(t, {f"{sd}_{b}": x for b, x in f.items()
                                                               for sd in ("left", "right")})))
    for label, f in (("stretched, one side: left arm 1.3 / 1.3", {"left_upper_arm": 1.3, "left_lower_arm": 1.3}),
                     ("stretched, one side: left arm 1.4 / 1.1, right leg 1.2 / 1.3",
                      {"left_upper_arm": 1.4, "left_lower_arm": 1.1, "right_upper_leg": 1.2, "right_lower_leg": 1.3}),
                     ("stretched, one side: right upper arm 0.85, left leg 1.1 / 0.9",
                      {"right_upper_arm": 0.85, "left_upper_leg": 1.1, "left_lower_leg": 0.9})):
        cases.append((label, lambda t, f=f: stretched_copy(t, f)))
    print("| copy of the template | N=41 off | N=41 on | N=96 off | N=96 on |\n|---|---|---|---|---|")
    for label, make in cases:
        cells = []
        for n in (41, 96):
            t = load_template(n)
            ch = make(t)
            for repro in (False, True):
                kv = transfer_keyverts(ch, n, shortcut=False, reproportion=repro)
                cells.append(f"{int((kv.vertex_ids == t.keyverts.vertex_ids).sum())}/{n}")
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
    return 0


SWEEP_REG = (0.8, 0.9, 1.0, 1.1, 1.25)
SWEEP_POINTS = (250, 300, 350)


def sweep(kvmod, humanoid, character, n, base=None):
    """{joint: [check() of each setting]} over SWEEP_REG x SWEEP_POINTS; joint False: each key vertex read out
    on its own (mirror=0), True: mirrored pairs read out jointly (the default)."""
    out = {}
    for joint in (False, True):
        out[joint] = [check(kvmod, humanoid, character,
                            kvmod.transfer_keyverts(character, n, reg=kvmod.DEFAULT_REG * f, max_points=mp,
                                                    mirror=None if joint else 0.0), n, base)
                      for f in SWEEP_REG for mp in SWEEP_POINTS]
    return out


def sweep_table(results):
    """Markdown lines summarising {name: sweep()} for both read-outs."""
    lines = ["| mirrored pairs read out | (character, setting) with a pair > 3 % | pairs > 3 % | mean pair asym. % h | "
             "mean of max pair asym. % h | characters with a pair > 3 % at the defaults |", "|---|---|---|---|---|---|"]
    for joint in (False, True):
        rs = [r for res in results.values() for r in res[joint]]
        at_default = [name for name, res in results.items()
                      if res[joint][SWEEP_REG.index(1.0) * len(SWEEP_POINTS) + SWEEP_POINTS.index(300)]["asym_over3"]]
        lines.append(f"| {'jointly' if joint else 'each alone'} | {sum(r['asym_over3'] > 0 for r in rs)}/{len(rs)} | "
                     f"{sum(r['asym_over3'] for r in rs)} | {np.mean([r['asym_mean'] for r in rs]):.3f} | "
                     f"{np.mean([r['asym_max'] for r in rs]):.2f} | {', '.join(at_default) or 'none'} |")
    lines.append("")
    lines.append("| character | settings with a pair > 3 %: each alone | jointly |")
    lines.append("|---|---|---|")
    for name, res in results.items():
        lines.append(f"| {name} | {sum(r['asym_over3'] > 0 for r in res[False])}/{len(res[False])} | "
                     f"{sum(r['asym_over3'] > 0 for r in res[True])}/{len(res[True])} |")
    return lines


ONE_SIDED = ({"left_upper_arm": 1.3, "left_lower_arm": 1.3},
             {"left_upper_arm": 1.4, "left_lower_arm": 1.1, "right_upper_leg": 1.2, "right_lower_leg": 1.3},
             {"right_upper_arm": 0.85, "left_upper_leg": 1.1, "left_lower_leg": 0.9})


def lambda_table(lams, core):
    """Markdown table choosing λ (``mirror``) of the joint read-out of mirrored pairs, one row per λ:
    real characters (every one with a mesh, the 15 sweep settings, N = 41 and 96): (character, setting) with a
    pair > 3 % and the mean pair asymmetry; ground-truth error (tools/experiments/keyverts_eval.py's five bodies, N =
    41, its default settings); ground-truth error on the asymmetric bodies ``ASYMMETRIC`` (rules applied to each
    thickened mesh; N = 96 without the bodies whose rules find no vertex); exact key vertices on the
    one-sided stretched copies of the template (``ONE_SIDED``, N = 41 + 96, through the OT)."""
    import bpy
    sys.path.insert(0, str(ROOT))
    from core import body as rbody
    from core import keyverts as rkv
    from core import types as rtypes
    from core.keyverts.rules import apply_rules
    from core.keyverts.transfer import _transfer
    from core.types import SkinnedMesh
    from tools.experiments.keyverts_eval import BODIES, ground_truth
    bridge, bonemap = core("reconform_addon.bridge"), core("core.bonemap")
    kvmod, humanoid, types = core("core.keyverts"), core("core.rig.humanoid"), core("core.types")
    chars = []
    for path in sorted((ASSETS / "characters").iterdir()):
        bpy.ops.wm.read_homefile(use_empty=True)
        arm = bridge.find_armature(bridge.import_file(str(path), report=lambda msg: None))
        sk = bridge.read_skeleton(arm)
        if not bridge.find_meshes(arm):
            continue
        mesh = bridge.read_skinned_mesh(arm, sk, report=lambda msg: None)
        chars.append(types.Character(sk, mesh, dict(bonemap.detect_bone_map(sk).bone_map)))
    geo = {}

    def asym(i, ch, kv):   # pair asymmetries (% h) as check() measures them, geometry computed once
        if i not in geo:
            geo[i] = (kvmod.tpose_geometry(ch)[0], kvmod.character_height(ch))
        pos, H = geo[i]
        P, idx = pos[kv.vertex_ids], {x: k for k, x in enumerate(kv.names)}
        left = [k for k, x in enumerate(kv.names) if x.startswith("left_")]
        mid = np.median([(P[k, 0] + P[idx[humanoid.mirror_name(kv.names[k])], 0]) / 2 for k in left])
        return np.array([np.linalg.norm((P[k] - [mid, 0, 0]) * [-1, 1, 1] + [mid, 0, 0]
                                        - P[idx[humanoid.mirror_name(kv.names[k])]]) / H * 100 for k in left])

    def gt_cases(n, bodies):
        out = []
        for make in bodies:
            try:
                out.append(make(n))
            except RuntimeError:   # a rule finds no vertex on this body at this N
                pass
        return out

    def asym_gt(params, pose, factors, n):
        ch = thickened(rbody, rtypes, rbody.SHORT_HEAVY if params is None else rbody.BodyParams(**params), pose,
                       factors)
        pos, nrm, _ = rkv.tpose_geometry(ch)
        skT = rbody.make_body(rbody.SHORT_HEAVY if params is None else rbody.BodyParams(**params), "T")[0]
        m = ch.mesh
        gt = apply_rules(skT, SkinnedMesh(m.name, pos, nrm, m.face_indices, m.face_offsets, m.weight_bones,
                                          m.weight_values), ch.bone_map, n)
        return ch, pos, gt

    sym41 = gt_cases(41, [lambda n, b=b: ground_truth(*b, n) for b in BODIES])
    asy = {n: gt_cases(n, [lambda n, a=a: asym_gt(*a[1:], n) for a in ASYMMETRIC]) for n in (41, 96)}
    one = {n: [stretched_copy(rkv.load_template(n), f) for f in ONE_SIDED] for n in (41, 96)}
    print(f"bodies with ground truth: {len(sym41)} symmetric (N = 41); asymmetric {len(asy[41])} (N = 41), "
          f"{len(asy[96])} (N = 96)\n")
    print("| λ | N=41: (character, setting) with a pair > 3 % | mean pair asym. % h | N=96: with a pair > 3 % | "
          "mean pair asym. % h | ground truth N=41: mean / p90 / max % h | asymmetric bodies N=41 / N=96: mean % h "
          "| one-sided stretched copies: exact |\n|---|---|---|---|---|---|---|---|")
    for lam in lams:
        cells = []
        for n in (41, 96):
            a = [asym(i, ch, kvmod.transfer_keyverts(ch, n, reg=kvmod.DEFAULT_REG * f, max_points=mp, mirror=lam))
                 for i, ch in enumerate(chars) for f in SWEEP_REG for mp in SWEEP_POINTS]
            cells += [f"{sum((x > 3).any() for x in a)}/{len(a)}", f"{np.mean([x.mean() for x in a]):.3f}"]
        e = np.concatenate([np.linalg.norm(pos[_transfer(ch, 41, None, rkv.DEFAULT_REG, ("snap_normal",), None,
                                                         None, None, mirror=lam)["snap_normal"].vertex_ids]
                                           - pos[gt], axis=1) / np.ptp(pos[:, 2]) * 100 for ch, pos, gt in sym41])
        cells.append(f"{e.mean():.3f} / {np.percentile(e, 90):.2f} / {e.max():.2f}")
        ea = [np.mean(np.concatenate([np.linalg.norm(pos[rkv.transfer_keyverts(ch, n, mirror=lam).vertex_ids] - pos[gt],
                                                     axis=1) / np.ptp(pos[:, 2]) * 100 for ch, pos, gt in asy[n]]))
              for n in (41, 96)]
        cells.append(f"{ea[0]:.3f} / {ea[1]:.3f}")
        ex = sum(int((rkv.transfer_keyverts(ch, n, shortcut=False, mirror=lam).vertex_ids
                      == rkv.load_template(n).keyverts.vertex_ids).sum()) for n in (41, 96) for ch in one[n])
        cells.append(f"{ex}/{3 * (41 + 96)}")
        print(f"| {lam:g} | " + " | ".join(cells) + " |", flush=True)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=41)
    ap.add_argument("--no-motions", action="store_true")
    ap.add_argument("--synthetic-only", action="store_true")
    ap.add_argument("--sweep", action="store_true", help="mirror check over 15 settings, pairs alone / jointly")
    ap.add_argument("--known", action="store_true", help="known-answer cases only (no add-on)")
    ap.add_argument("--lambdas", help="comma list: choose λ of the joint read-out of mirrored pairs (table)")
    args = ap.parse_args(argv)
    if args.known:
        return known_answers()
    core = enable_addon()
    if args.lambdas:
        return lambda_table([float(x) for x in args.lambdas.split(",")], core)
    import bpy
    bridge, bonemap = core("reconform_addon.bridge"), core("core.bonemap")
    kvmod, humanoid, body, types = core("core.keyverts"), core("core.rig.humanoid"), core("core.body"), core("core.types")
    print(f"N = {args.n}\n")
    print(HEADER)
    kvmod.transfer_keyverts(kvmod.load_template(args.n).character, args.n)  # warm-up (imports, template bias)
    swept = {}
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
            if not core("core.rig.tpose").rest_is_standing(sk, res.bone_map):  # reference frame, as copy_rotations
                clip = bridge.read_motion(arm, sk)
                base = core("core.character.frame").reference_basis(types.Character(sk, None, res.bone_map), clip)
            mesh = body.fit_body_to_skeleton(sk, res.bone_map, base=base)
            note = "skeleton only: fitted body" + (" (T-pose from the feet-flat frame: rest not standing)" if base is not None
                                                   else "")
        ch = types.Character(sk, mesh, dict(res.bone_map))
        t = time.perf_counter()
        kv = kvmod.transfer_keyverts(ch, args.n)
        dt = time.perf_counter() - t
        print(row(path.name, mesh.num_verts, check(kvmod, humanoid, ch, kv, args.n, base), dt, note), flush=True)
        if args.sweep and meshes:
            swept[path.name] = sweep(kvmod, humanoid, ch, args.n, base)
    for line in synthetic(core, args.n):
        print(line, flush=True)
    if swept:
        print(f"\nSweep (N = {args.n}): {len(SWEEP_REG) * len(SWEEP_POINTS)} settings per character\n")
        print("\n".join(sweep_table(swept)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
