"""Where the penetration between the characters of a salsa couple lies (docs/metrics.md "Partners",
``partner_pen_mean``): per method (the source couple, copy-rotations placed together, the joint solve), the area
share of each character's sampled surface inside the partner's capsules, broken down by the segment the
vertex belongs to and the partner's capsule nearest to containing it (docs/solver.md "Multi-character").

    .venv/bin/python tools/experiments/partner_pen_parts.py [--case 05] [--frames 240] [--set w_partner=1]

The shares are means over frames of the sum over the vertices inside, halved (the metric's mean over the two
characters); the total equals ``partner_pen_mean`` of the same tracks.
"""

from __future__ import annotations

import argparse
import importlib
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


def breakdown(tracks, mp, parts, measures) -> dict:
    """{(character, vertex segment, partner capsule segment): area share, mean over frames / K}."""
    bodies = [mp._body(tr) for tr in tracks]
    segs = []
    for tr in tracks:
        ch = tr.character
        seg, bones, bone_ids = parts.vertex_segments(ch.skeleton, ch.mesh, ch.bone_map)
        caps = measures.segment_capsules(ch, seg, bones, bone_ids)
        V = ch.mesh.num_verts
        sample = np.arange(0, V, max(1, int(np.ceil(V / mp.PARTNER_PEN_MAX_VERTICES))))
        keep = np.nonzero(caps.radius > 0)[0]
        segs.append(([bones[s] if s >= 0 else "?" for s in seg[sample]], [bones[i] for i in keep]))
    K, T = len(tracks), tracks[0].num_frames
    out = {}
    for a in range(K):
        for b in range(K):
            if a == b:
                continue
            va, cb = bodies[a], bodies[b]
            for t in range(T):
                d = measures.point_segment_distance(va["verts"][t][:, None], cb["a"][t][None], cb["b"][t][None])
                inside = torch.nonzero((d < cb["r"]).any(-1))[:, 0]
                for k in inside.tolist():
                    cap = int(torch.argmin(d[k] - cb["r"]))
                    key = (a, segs[a][0][k], segs[b][1][cap])
                    out[key] = out.get(key, 0.0) + float(va["area"][k]) / (T * K)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="05", choices=("01", "05", "15"))
    ap.add_argument("--frames", type=int, default=240)
    ap.add_argument("--quality", default="balanced")
    ap.add_argument("--set", action="append", default=[], help="solver setting override NAME=VALUE")
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    mods = bp.modules()
    mod = lambda name: importlib.import_module(f"{common.MODULE}.core.{name}")     # noqa: E731
    rt, grp = mods["core.pipeline.retarget"], mods["core.pipeline.group"]
    mp, ClipTrack = mod("metrics.partners"), mod("character.track").ClipTrack
    overrides = common.setting_overrides(args.set)
    settings = mods["core.solver"].SolverSettings.preset(args.quality, num_threads=1, **overrides)
    loader = common.Loader(mods, lambda s: None)
    label, lead, follow, t_lead, t_follow = next(c for c in bp.CASES if c[0].endswith(args.case))
    pairs = bp.load_pairs(loader, [(lead, t_lead, 0.0), (follow, t_follow, 0.0)], bp.FIRST, args.frames)
    joint = grp.run_group(grp.RetargetGroup(pairs, rt.RetargetOptions(settings=settings, conflicts=False)))
    runs = {"source": [m.source_track for m in joint.members],
            "copy-rot": [ClipTrack(m.target, m.init_motion) for m in joint.members],
            "joint": [ClipTrack(m.target, m.motion) for m in joint.members]}
    names = [pathlib.Path(t).stem for t in (t_lead, t_follow)]
    print(f"{label}: {names[0]} & {names[1]}, clip frames {bp.FIRST}-{bp.FIRST + args.frames - 1}, {args.quality}"
          + (f", {overrides}" if overrides else ""))
    for key, tracks in runs.items():
        shares = breakdown(tracks, mp, mod("rig.parts"), mod("metrics.measures"))
        total = sum(shares.values())
        hands = sum(v for (_, sa, sb), v in shares.items() if sa in mp.HAND_LIMBS and sb in mp.HAND_LIMBS)
        print(f"  {key}: {100 * total:.4f} % of the surface inside the partner, of which hand in hand "
              f"{100 * hands:.4f} %")
        for (a, sa, sb), v in sorted(shares.items(), key=lambda kv: -kv[1])[:args.top]:
            print(f"      {('lead', 'follow')[a]:6s} {sa:16s} in the partner's {sb:16s} {100 * v:.4f} %")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
