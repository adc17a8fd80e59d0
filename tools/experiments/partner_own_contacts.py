"""A salsa couple (``bench_partners``' cases): which of each target's own key-vertex contacts the joint solve
keeps against the solve alone (docs/solver.md "Multi-character": own contact F1).

    .venv/bin/python tools/experiments/partner_own_contacts.py [--case 05] [--top 6]

Per character: contact F1, TP / FP / FN pair-frames alone and jointly (the metrics' definition, core.metrics:
key-vertex pairs within 5 % of h in the source vs in the target), then the pairs whose captured contacts the
joint solve loses most often. 'balanced', 1 thread; both solves start from copy-rotations placed together.
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="05", choices=("01", "05", "15"))
    ap.add_argument("--top", type=int, default=6)
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    import bench
    import bench_partners as bp
    mods = bp.modules()
    loader = bench.Loader(mods, lambda s: None)
    rt, grp = mods["core.retarget"], mods["core.retarget_group"]
    metrics = importlib.import_module(f"{bench.MODULE}.core.metrics")
    measures = importlib.import_module(f"{bench.MODULE}.core.measures")
    weights = importlib.import_module(f"{bench.MODULE}.core.weights")
    track_mod = importlib.import_module(f"{bench.MODULE}.core.track")
    label, lead, follow, t_lead, t_follow = next(c for c in bp.CASES if c[0].endswith(args.case))
    pairs = bp.load_pairs(loader, [(lead, t_lead, 0.0), (follow, t_follow, 0.0)], bp.FIRST, bp.FRAMES)
    settings = mods["core.solver"].SolverSettings.preset("balanced", num_threads=1)
    opts = rt.RetargetOptions(settings=settings, conflicts=False, metrics=False)
    joint = grp.run_group(grp.RetargetGroup(pairs, opts))
    print(f"{label}, {bp.FRAMES} frames, load average {os.getloadavg()[0]:.1f}")
    for (src, mo, tgt), member in zip(pairs, joint.members):
        alone = rt.run(rt.Retarget(src, mo, tgt, dataclasses.replace(opts, init_motion=member.init_motion),
                                   source_track=member.source_track))
        s_ch, t_ch = member.source, member.target
        names = s_ch.keyverts.names
        ii, jj = np.nonzero(weights.allowed_pairs(s_ch.keyverts.limbs, None, True))
        order = [t_ch.keyverts.names.index(n) for n in names]
        truth = measures.pairs_closer(measures.measure(member.source_track, member.source_ground,
                                                s_ch.keyverts.vertex_ids).keyverts,
                                ii, jj, metrics.CONTACT_FRACTION * float(s_ch.height))
        pred = {}
        for how, motion in (("alone", alone.motion), ("joint", member.motion)):
            kv = measures.measure(track_mod.ClipTrack(t_ch, motion), 0.0, t_ch.keyverts.vertex_ids[order]).keyverts
            pred[how] = p = measures.pairs_closer(kv, ii, jj, metrics.CONTACT_FRACTION * float(t_ch.height))
            print(f"{t_ch.name} {how}: contact F1 {metrics.f1_score(truth, p):.3f}, TP {int((truth & p).sum())}, "
                  f"FP {int((~truth & p).sum())}, FN {int((truth & ~p).sum())} pair-frames")
        lost = (truth & pred["alone"] & ~pred["joint"]).sum(0)
        for k in np.argsort(-lost)[:args.top]:
            if lost[k]:
                print(f"   {names[ii[k]]} - {names[jj[k]]}: {int(truth[:, k].sum())} captured frames, kept "
                      f"{int((truth[:, k] & pred['alone'][:, k]).sum())} alone, "
                      f"{int((truth[:, k] & pred['joint'][:, k]).sum())} jointly")
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
