"""The demo couple ('Lead'/'Follow' retargeted together onto 'Giant' 2.05 m and 'Child' 1.30 m, tools/demo.py)
solved with solver setting overrides, to see what keeps the hands apart (docs/solver.md "Multi-character"): the
partner metrics, the solver's final weighted terms, each target's own F1s and how far its feet go under the floor.

    .venv/bin/python tools/demo.py --out /tmp/d --quality fast          # builds /tmp/d/demo.blend
    .venv/bin/python tools/experiments/demo_couple_weights.py /tmp/d/demo.blend [--set w_partner=3] [--quality balanced]
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))

import render_docs as rd  # noqa: E402  (enables the add-on; imports bpy)
from render_docs import bpy, mod  # noqa: E402
from settings_args import setting_overrides  # noqa: E402  (the benches' --set)

COUPLE = (("Lead", "Giant", "LeadDance"), ("Follow", "Child", "FollowDance"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("blend")
    ap.add_argument("--quality", default="balanced")
    ap.add_argument("--set", action="append", default=[], help="solver setting override NAME=VALUE")
    args = ap.parse_args(argv)
    rd.enable_addon()
    bpy.ops.wm.open_mainfile(filepath=args.blend)
    group = mod("reconform_addon.pipeline_group")
    overrides = setting_overrides(args.set)
    pairs = [(bpy.data.objects[s], bpy.data.objects[t], bpy.data.actions[a]) for s, t, a in COUPLE]
    res = group.retarget_group(pairs, method="reconform", settings={"quality": args.quality, **overrides})
    out = res.outcome
    pm = out.partner_metrics
    print(f"{args.quality} {overrides}: partner contact F1 {pm['partner_contact_f1']:.3f}, hand-partner error "
          f"{100 * pm['hand_partner_error_mean']:.2f} % h, partner penetration {100 * pm['partner_pen_mean']:.3f} % "
          f"(source {100 * pm['source_partner_pen_mean']:.3f} %)")
    terms = out.solver_stats.get("final_terms") or {}
    print("  final weighted terms: " + ", ".join(f"{k} {float(v):.2f}" for k, v in terms.items()))
    track = mod("core.character.track")
    for m in out.members:
        print(f"  {m.target.name}: " + ", ".join(f"{k} {m.metrics[k]:.3f}" for k in
                                                 ("contact_f1", "grounded_f1", "locked_f1", "locked_strict_f1", "floor_pen_mean", "jerk_mean")
                                                 if k in m.metrics))
        # how far its feet go under the floor (z = 0): the lowest mesh point of either foot, per frame
        low = track.ClipTrack(m.target, m.motion).lowest_foot
        print(f"    lowest foot point: min {1000 * low.min():.1f} mm, 10th percentile "
              f"{1000 * np.percentile(low, 10):.1f} mm, {int((low < -0.002).sum())} of {len(low)} frames below -2 mm")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
