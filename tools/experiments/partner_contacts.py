"""Which contacts between two characters a joint solve keeps, by limb pair (docs/solver.md "Multi-character"): a
salsa couple of the partner bench solved jointly, and each character alone, against the source couple.

    .venv/bin/python tools/experiments/partner_contacts.py [--case 15] [--frames 720] [--top 12]
        [--set w_barrier=0] [--no-alone]

Per pair of limbs (the lead's, the follow's), the source's contact entries (key-vertex pairs of the two characters
closer than d_min = 5 % of their mean height, per frame: the partner contact F1's ground truth, docs/metrics.md
"Partners"), and for copy-rotations placed together, each character solved alone and the joint solve: the
entries kept (true positives), missed and added (false positives), and the median distance of the missed ones as
a share of d_min. One thread, the 'balanced' preset (``--set``: SolverSettings overrides, for every solve), the
partner bench's clip range.
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import sys

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))

import common  # noqa: E402  (the bench's loader; enables the add-on)
import bench_partners as bp  # noqa: E402  (the partner bench's cases)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="15", choices=("01", "05", "15"))
    ap.add_argument("--frames", type=int, default=bp.FRAMES)
    ap.add_argument("--top", type=int, default=12, help="limb pairs listed, most source entries first")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a SolverSettings override")
    ap.add_argument("--no-alone", action="store_true", help="skip the characters solved alone")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    mods = bp.modules()
    rt, grp, mp = mods["core.pipeline.retarget"], mods["core.pipeline.group"], mods["core.metrics.partners"]
    track_cls = mods["core.character.track"].ClipTrack
    loader = common.Loader(mods, lambda s: None)
    label, lead, follow, t_lead, t_follow = next(c for c in bp.CASES if c[0].endswith(args.case))
    pairs = bp.load_pairs(loader, [(lead, t_lead, 0.0), (follow, t_follow, 0.0)], bp.FIRST, args.frames)
    settings = mods["core.solver"].SolverSettings.preset("balanced", num_threads=1,
                                                        **common.setting_overrides(args.set))
    opts = rt.RetargetOptions(settings=settings, conflicts=False)
    joint = grp.run_group(grp.RetargetGroup(pairs, opts))
    alone = [] if args.no_alone else [
        rt.run(rt.Retarget(s, m, t, rt.RetargetOptions(settings=settings, conflicts=False, init_motion=o.init_motion)))
        for (s, m, t), o in zip(pairs, joint.members)]
    src = [track_cls(o.source, m) for o, (_, m, _) in zip(joint.members, pairs)]
    kv_s = [mp._keyverts(tr) for tr in src]
    hs = [float(tr.character.height) for tr in src]
    limbs = [np.asarray(tr.character.keyverts.limbs) for tr in src]
    ((_, _, ds, lim_s),) = mp._contacts(kv_s, hs)           # the partner contact F1's distances and d_min
    truth = ds < lim_s                                                         # (T, N_a, N_b)
    methods = {"copy-rot": [o.init_motion for o in joint.members], "alone": [o.motion for o in alone],
               "joint": [o.motion for o in joint.members]}
    if not alone:
        del methods["alone"]
    ht = [float(o.target.height) for o in joint.members]
    pred, dist = {}, {}
    for name, motions in methods.items():
        kv = [mp._keyverts(track_cls(o.target, m), mp._order(o.source, o.target))
              for o, m in zip(joint.members, motions)]
        ((_, _, dist[name], lim_t),) = mp._contacts(kv, ht)
        pred[name] = dist[name] < lim_t
    key = np.char.add(np.char.add(limbs[0][:, None], " ~ "), limbs[1][None, :])   # (N_a, N_b) limb pair names
    groups = collections.Counter(key[np.nonzero(truth.any(0))].tolist())
    per = collections.Counter()
    for t, i, j in zip(*np.nonzero(truth)):
        per[key[i, j]] += 1
    print(f"{label}: {pathlib.Path(t_lead).stem} (lead) & {pathlib.Path(t_follow).stem} (follow), {args.frames} "
          f"frames, {' '.join(args.set) or 'defaults'}; source contact entries {int(truth.sum())} over {int(truth.any((1, 2)).sum())} frames, "
          f"{len(groups)} limb pairs")
    for name in methods:
        p = pred[name]
        tp, fn, fp = int((truth & p).sum()), int((truth & ~p).sum()), int((~truth & p).sum())
        f1 = 2 * tp / max(2 * tp + fn + fp, 1)
        print(f"{name}: kept {tp}, missed {fn}, added {fp}: F1 {f1:.3f}")
    print("| lead limb ~ follow limb | source entries | " + " | ".join(
        f"{n} kept / missed / added" for n in methods) + " | joint: missed at (median, × d_min) |")
    print("|---|---|" + "---|" * len(methods) + "---|")
    for pair, n in per.most_common(args.top):
        sel = key == pair
        cells = []
        for name in methods:
            p = pred[name][:, sel]
            tr = truth[:, sel]
            cells.append(f"{int((tr & p).sum())} / {int((tr & ~p).sum())} / {int((~tr & p).sum())}")
        miss = dist["joint"][:, sel][truth[:, sel] & ~pred["joint"][:, sel]]
        cells.append(f"{np.median(miss) / lim_t:.2f}" if miss.size else "-")
        print(f"| {pair} | {n} | " + " | ".join(cells) + " |")
    added = collections.Counter()
    for t, i, j in zip(*np.nonzero(~truth & pred["joint"])):
        added[key[i, j]] += 1
    print("joint solve's added entries by limb pair (no source contact there): "
          + ", ".join(f"{k} {v}" for k, v in added.most_common(6)))
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
