"""Choose the key-vertex OT read-out, entropy and normalisation by measurement against ground truth.

    .venv/bin/python tools/experiments/keyverts_eval.py [--n 41] [--regs 0.01,0.03,0.1] [--max-points 300]

Ground truth: generated bodies (core.body) of other morphologies and rest poses carry the same semantic
rules as the template (core.keyverts.rules), so each rule gives the vertex the key vertex *should* land
on. Error = distance between the transferred and the ground-truth vertex in the T-pose, in % of the height.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.body import SHORT_HEAVY, TALL_THIN, BodyParams, make_body  # noqa: E402
from core.keyverts import load_template, tpose_geometry  # noqa: E402
from core.keyverts.rules import apply_rules  # noqa: E402
from core.keyverts.transfer import _transfer  # noqa: E402
from core.types import Character, SkinnedMesh  # noqa: E402

BODIES = [
    ("neutral_A", BodyParams(name="neutral_A"), "A"),
    ("tall_thin_T", TALL_THIN, "T"),
    ("short_heavy_A", SHORT_HEAVY, "A"),
    ("long_arms_big_head_A", BodyParams(arm_length=1.2, head_size=1.2, leg_length=0.9, hand_size=1.15,
                                        foot_size=1.1, name="long_arms_big_head", a_pose_angle=35), "A"),
    ("muscular_T", BodyParams(limb_thickness=1.3, torso_width=1.15, shoulder_width=1.15, chest=1.3,
                              name="muscular"), "T"),
]


def ground_truth(name, params, pose, n):
    skel, mesh, bmap = make_body(params, pose)
    ch = Character(skel, mesh, bmap)
    pos, nrm, _ = tpose_geometry(ch)
    # rules are evaluated on the T-posed body (canonical skeleton in T-pose = make_body(..., 'T'))
    skT, meT, _ = make_body(params, "T")
    gt = apply_rules(skT, SkinnedMesh(meT.name, pos, nrm, mesh.face_indices, mesh.face_offsets, mesh.weight_bones,
                                      mesh.weight_values), bmap, n)
    return ch, pos, gt


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=41)
    ap.add_argument("--regs", default="0.01,0.03,0.1")
    ap.add_argument("--normalize", default="axis,iso")
    ap.add_argument("--max-points", type=int, default=None)
    ap.add_argument("--detail", default="", help="read-out whose worst key vertices to list")
    ap.add_argument("--debias", default="1", help="comma list of 1/0: remove the template self-map bias")
    args = ap.parse_args(argv)
    readouts = ("argmax", "barycentric", "snap_normal")
    regs = [float(r) for r in args.regs.split(",")]
    tpl = load_template(args.n)
    cases = [ground_truth(nm, p, pose, args.n) + (nm,) for nm, p, pose in BODIES]
    print(f"N={args.n}; error = |transferred - ground truth| in % of height (T-pose); mean / 90th pct / max")
    print(f"{'normalize':9s} {'reg':>6s} {'debias':6s} {'readout':12s} {'mean':>6s} {'p90':>6s} {'max':>6s} {'>5%':>4s} {'s/char':>6s}")
    for norm, reg, debias in [(nz, r, d) for nz in args.normalize.split(",") for r in regs
                              for d in (int(x) for x in args.debias.split(","))]:
        if True:
            errs = {r: [] for r in readouts}
            t0 = time.perf_counter()
            for ch, pos, gt, nm in cases:
                H = np.ptp(pos[:, 2])
                res = _transfer(ch, args.n, None, reg, readouts, norm, args.max_points, tpl, bool(debias))
                for r in readouts:
                    errs[r].append(np.linalg.norm(pos[res[r].vertex_ids] - pos[gt], axis=1) / H * 100)
            dt = (time.perf_counter() - t0) / len(cases)
            if args.detail:
                e = np.stack(errs[args.detail]).mean(0)
                worst = np.argsort(-e)[:6]
                print("    worst (mean over bodies):", ", ".join(f"{tpl.keyverts.names[k]} {e[k]:.1f}" for k in worst))
            for r in readouts:
                e = np.concatenate(errs[r])
                print(f"{norm:9s} {reg:6.3f} {debias:6d} {r:12s} {e.mean():6.2f} {np.percentile(e, 90):6.2f} {e.max():6.2f} "
                      f"{int((e > 5).sum()):4d} {dt:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
