"""A salsa couple (``bench_partners``' cases): which of each target's own key-vertex contacts the joint solve
keeps against the solve alone (docs/solver.md "Multi-character": own contact F1).

    .venv/bin/python tools/experiments/partner_own_contacts.py [--case 05] [--top 6] [--slider 0.2 --fraction 0.05]

Per character: contact F1, TP / FP / FN pair-frames alone and jointly (the metrics' definition, core.metrics.scores:
key-vertex pairs within 5 % of h in the source vs in the target), then the pairs whose captured contacts the
joint solve loses most often. 'balanced', 1 thread; both solves start from copy-rotations placed together.

``--slider V`` (repeatable): then the joint solve's conflicts between a character's own terms and the terms between
the characters ("partner", ``core.solver.conflicts.detecting_group``), and for each V the group re-solved as the panel's
Re-solve does with every such slider at V (0: the character's own term only on that part, 0.5: unchanged, 1: the
partner term only) for ``--fraction`` of the iterations: each character's own contact F1 and the partner metrics.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="05", choices=("01", "05", "15"))
    ap.add_argument("--top", type=int, default=6)
    ap.add_argument("--slider", type=float, action="append", default=[],
                    help="re-solve the group with every partner conflict's slider at this value (repeatable)")
    ap.add_argument("--fraction", type=float, default=0.05, help="share of the iterations a re-solve runs")
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    import common
    import bench_partners as bp
    mods = bp.modules()
    loader = common.Loader(mods, lambda s: None)
    rt, grp = mods["core.pipeline.retarget"], mods["core.pipeline.group"]
    metrics = importlib.import_module(f"{common.MODULE}.core.metrics.scores")
    measures = importlib.import_module(f"{common.MODULE}.core.metrics.measures")
    weights = importlib.import_module(f"{common.MODULE}.core.descriptors.weights")
    track_mod = importlib.import_module(f"{common.MODULE}.core.character.track")
    label, lead, follow, t_lead, t_follow = next(c for c in bp.CASES if c[0].endswith(args.case))
    pairs = bp.load_pairs(loader, [(lead, t_lead, 0.0), (follow, t_follow, 0.0)], bp.FIRST, bp.FRAMES)
    settings = mods["core.solver"].SolverSettings.preset("balanced", num_threads=1)
    opts = rt.RetargetOptions(settings=settings, conflicts=False, metrics=False)
    joint = grp.run_group(grp.RetargetGroup(pairs, opts))
    print(f"{label}, {bp.FRAMES} frames, load average {os.getloadavg()[0]:.1f}")

    def own_pairs(member, motion):
        """(truth, predicted) (T, P) contacts of ``member``'s allowed key-vertex pairs, (i, j), names."""
        s_ch, t_ch = member.source, member.target
        names = s_ch.keyverts.names
        ii, jj = np.nonzero(weights.allowed_pairs(s_ch.keyverts.limbs, None, True))
        order = [t_ch.keyverts.names.index(n) for n in names]
        truth = measures.pairs_closer(measures.measure(member.source_track, member.source_ground,
                                                       s_ch.keyverts.vertex_ids).keyverts,
                                      ii, jj, metrics.CONTACT_FRACTION * float(s_ch.height))
        kv = measures.measure(track_mod.ClipTrack(t_ch, motion), 0.0, t_ch.keyverts.vertex_ids[order]).keyverts
        return truth, measures.pairs_closer(kv, ii, jj, metrics.CONTACT_FRACTION * float(t_ch.height)), ii, jj, names

    for (src, mo, tgt), member in zip(pairs, joint.members):
        alone = rt.run(rt.Retarget(src, mo, tgt, dataclasses.replace(opts, init_motion=member.init_motion),
                                   source_track=member.source_track))
        pred = {}
        for how, motion in (("alone", alone.motion), ("joint", member.motion)):
            truth, pred[how], ii, jj, names = own_pairs(member, motion)
            p = pred[how]
            print(f"{member.target.name} {how}: contact F1 {metrics.f1_score(truth, p):.3f}, "
                  f"TP {int((truth & p).sum())}, FP {int((~truth & p).sum())}, FN {int((truth & ~p).sum())} pair-frames")
        lost = (truth & pred["alone"] & ~pred["joint"]).sum(0)
        for k in np.argsort(-lost)[:args.top]:
            if lost[k]:
                print(f"   {names[ii[k]]} - {names[jj[k]]}: {int(truth[:, k].sum())} captured frames, kept "
                      f"{int((truth[:, k] & pred['alone'][:, k]).sum())} alone, "
                      f"{int((truth[:, k] & pred['joint'][:, k]).sum())} jointly")
    if not args.slider:
        return 0
    cf = importlib.import_module(f"{common.MODULE}.core.solver.conflicts")
    partners_metrics = importlib.import_module(f"{common.MODULE}.core.metrics.partners")
    found = cf.detect_group_conflicts(joint.job)
    tracks = [m.source_track for m in joint.members]
    held = [[c for c in cs if "partner" in (c.term_a, c.term_b)] for cs in found]
    for member, cs, every in zip(joint.members, held, found):
        print(f"{member.target.name}: {len(every)} conflicts, {len(cs)} with the terms between the characters: "
              + "; ".join(f"{c.body_part} {c.term_a}/{c.term_b} cost {c.score:.2f}" for c in cs[:args.top]))

    def line(name, members_motions):
        pm = partners_metrics.evaluate_partners(tracks, [(m.target, mo) for m, mo in zip(joint.members,
                                                                                         members_motions)])
        own = [metrics.f1_score(*own_pairs(m, mo)[:2]) for m, mo in zip(joint.members, members_motions)]
        print(f"{name}: own contact F1 " + " / ".join(f"{f:.3f}" for f in own) + f" (mean {np.mean(own):.3f}), "
              f"partner contact F1 {pm['partner_contact_f1']:.3f}, hand-to-partner error "
              f"{100 * pm['hand_partner_error_mean']:.2f} % h, "
              f"penetration between {100 * pm['partner_pen_mean']:.3f} %")
    line("joint", [m.motion for m in joint.members])
    for v in args.slider:
        pws = [cf.merge_part_weights(*[cf.resolution_weights(c, v) for c in cs]) for cs in held]
        job = grp.RetargetGroup.resolving(joint, pws, args.fraction)
        for _ in job.steps():
            pass
        line(f"re-solved, sliders at {v:g}, {job.job.total} steps", job.outcome.motions)
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
