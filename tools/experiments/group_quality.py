"""Each couple of a larger group, against the same couple solved as a group of two: `make bench`'s K = 5 timing set
(tools/bench/bench_partners.py FIVE: salsa 15's couple, salsa 05's couple 3 m away, a solo dancer 3 m the other way,
600 frames) retargeted jointly through ``core.pipeline.group`` (copy-rotations placed together, then the joint
solve), and each couple again on its own; per couple, the partner metrics of copy-rotations' start and of the
solve (docs/metrics.md "Partners"). A couple's start and result in the larger group should read as in its own.

    .venv/bin/python tools/experiments/group_quality.py [--frames 600] [--iterations 120]

1 thread, the 'balanced' preset.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))

KEYS = ("partner_contact_f1", "hand_partner_error_mean", "partner_pen_mean")
COUPLES = {"salsa 15": (0, 1), "salsa 05": (2, 3)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=600)
    ap.add_argument("--iterations", type=int, default=120)
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    import common
    import bench_partners as bp
    mods = bp.modules()
    loader = common.Loader(mods, lambda s: None)
    pairs = bp.load_pairs(loader, bp.FIVE, bp.FIRST, args.frames)
    rt, grp, mp = mods["core.pipeline.retarget"], mods["core.pipeline.group"], mods["core.metrics.partners"]
    settings = mods["core.solver"].SolverSettings.preset("balanced", num_threads=1, iterations=args.iterations)
    opts = rt.RetargetOptions(settings=settings, conflicts=False)

    def couple_metrics(out, members):
        """{method: {key: value}} of the couple ``members`` (indices into ``out.members``)."""
        tracks = [out.members[i].source_track for i in members]
        return {method: mp.evaluate_partners(tracks, [(out.members[i].target, motion(out.members[i]))
                                                      for i in members])
                for method, motion in (("copy", lambda m: m.init_motion), ("solve", lambda m: m.motion))}

    def fmt(v, k):
        return f"{100 * v:.3f} %" if "pen" in k else (f"{100 * v:.2f} % h" if "hand" in k else f"{v:.3f}")

    t0 = time.perf_counter()
    five = grp.run_group(grp.RetargetGroup(pairs, opts))
    print(f"K = 5 jointly: {time.perf_counter() - t0:.1f} s (set-up, solve and metrics)")
    for name, members in COUPLES.items():
        t0 = time.perf_counter()
        two = grp.run_group(grp.RetargetGroup([pairs[i] for i in members], opts))
        seconds = time.perf_counter() - t0
        in_five, alone = couple_metrics(five, members), couple_metrics(two, (0, 1))
        print(f"{name} ({seconds:.1f} s as a group of two):")
        for method in ("copy", "solve"):
            print(f"  {method:5s} " + "; ".join(f"{k} {fmt(in_five[method][k], k)} in the five, "
                                               f"{fmt(alone[method][k], k)} as two" for k in KEYS))
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
