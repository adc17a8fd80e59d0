"""What holds a limb inside the body at a solve's result: on chosen frames, per joint of the arms and the trunk, each
term's gradient with respect to the frames' variables (the 6D residuals) beside the self barrier's, and the source
contacts that the contact state pulls there (docs/solver.md "The contact state yields to the self barrier").

    OMP_NUM_THREADS=1 .venv/bin/python tools/experiments/limb_holds.py --zoo salsa_follow:big_belly --frames 3:8 \\
        [--limbs left_arm right_arm] [--const core.MODULE.NAME=VALUE] [--set NAME=VALUE]

For each joint: the norm of each term's gradient over the frames (α = 1, the weighted terms as the solver sums them;
'state' is the contact state, which 'dist' includes) and in brackets its cosine with the self barrier's ('pen': L_pen
and the self barrier, the capsules' and the surface's): a term at −1 pulls straight against it. Then the active pair
entries of those frames with a key vertex on ``--limbs``, the closest in the source first: the source's distance and
d_min, the target's. ``--frames A:B``: frames A to B − 1 of the clip (0-based). ``--cases``, ``--zoo``: as
``case_lines.py``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))

#: the joints reported (canonical names): the trunk and the arms
JOINTS = ("spine", "chest", "upper_chest", "left_shoulder", "left_upper_arm", "left_lower_arm", "left_hand",
          "right_shoulder", "right_upper_arm", "right_lower_arm", "right_hand")


def term_gradients(job, frames: slice) -> tuple:
    """({term: (F, Jo, 6) gradient of the weighted term over ``frames``}, {term: value}) at ``job``'s result, with
    respect to the per-frame 6D residuals (``core.solver.conflicts.term_gradients``); 'state' the contact state alone
    (in 'dist' too) when the job has one."""
    import torch
    import common
    with torch.no_grad():
        values = {k: float(v) for k, v in job.weighted_terms(alpha=1.0).items()}
    state = job.objective.last_contact_state
    if state is not None:
        values["state"] = float(state)
    grads = common.core("solver.conflicts").term_gradients(
        job, tuple(values), 1.0, extra=lambda p, n: {"state": job.objective.last_contact_state})
    return {k: g[frames] for k, g in grads.items()}, values


def pulled_pairs(job, target, frames: slice, limbs: tuple) -> list:
    """[(frame, limb i, key vertex i, limb j, key vertex j, source distance, source d_min, target distance, target
    d_min)] of the active pair entries at ``job``'s result on ``frames`` with a key vertex on one of ``limbs``,
    metres, the closest in the source (over its d_min) first."""
    import torch
    with torch.no_grad():
        p, _, _ = job._forward()
        pairs = job.objective.pairs.active(p, 1.0)
    names = list(target.keyverts.limbs)
    rows = []
    for e, (t, i, j) in enumerate(zip(pairs.t.tolist(), pairs.i.tolist(), pairs.j.tolist())):
        if frames.start <= t < frames.stop and (names[i] in limbs or names[j] in limbs):
            rows.append((t, names[i], i, names[j], j, float(pairs.src_dist[e]), float(pairs.src_dmin[e]),
                         float((p[t, i] - p[t, j]).norm()), float(pairs.tgt_dmin[e])))
    return sorted(rows, key=lambda row: row[5] / row[6])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", default="0:10", help="A:B, frames A to B − 1 (0-based)")
    ap.add_argument("--limbs", nargs="+", default=["left_arm", "right_arm"], help="key-vertex limbs of the pairs")
    ap.add_argument("--pairs", type=int, default=20, help="pair entries listed")
    import bench_zoo
    import common
    bench_zoo.add_case_options(ap)
    common.add_variant_options(ap)
    args = ap.parse_args(argv)
    a, b = (int(x) for x in args.frames.split(":"))
    frames = slice(a, b)
    mods, loader, settings = common.variant_start(args)
    for label, src, smo, tgt in bench_zoo.chosen_cases(args, mods, loader):
        o = common.retarget(mods, src, smo, tgt, settings, metrics=False)
        job = o.job
        grads, values = term_gradients(job, frames)
        canonical = common.core("rig.parts").bone_canonical(tgt.skeleton, tgt.bone_map)
        joints = [canonical[k] or tgt.skeleton.names[k] for k in job.opt_idx]
        print(f"== {label}, frames {a}–{b - 1}: weighted terms at the result "
              + ", ".join(f"{k} {v:.3g}" for k, v in values.items()))
        barrier = grads["pen"]
        for k, joint in enumerate(joints):
            if joint not in JOINTS:
                continue
            ref = barrier[:, k].flatten()
            cells = []
            for name, g in grads.items():
                g = g[:, k].flatten()
                cos = float(g @ ref) / max(float(g.norm() * ref.norm()), 1e-30)
                cells.append(f"{name} {float(g.norm()):.3g} ({cos:+.2f})")
            print(f"  {joint:>16}: " + ", ".join(cells))
        rows = pulled_pairs(job, tgt, frames, tuple(args.limbs))
        print(f"  {len(rows)} pair entries with a key vertex on {', '.join(args.limbs)}; the closest in the source:")
        for t, li, i, lj, j, sd, sdm, td, tdm in rows[:args.pairs]:
            print(f"    frame {t} {li} #{i} – {lj} #{j}: source {1000 * sd:.0f} mm (d_min {1000 * sdm:.0f}), "
                  f"target {1000 * td:.0f} mm (d_min {1000 * tdm:.0f})")
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
