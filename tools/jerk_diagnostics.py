"""Where the jerk of a retarget comes from, joint by joint, on one bench case (tools/bench.py CASES).

    .venv/bin/python tools/jerk_diagnostics.py [CASE] ["{'w_smooth': 1.0}"] [--max-frames 400]

CASE is a substring of the clip name (default: the Bandai kick). For the core bones both characters map
(the joints of docs/metrics.md), prints the mean jerk per unit of height (m/s³ / h_c) of the source,
copy-rotations and ReConForM (``balanced`` preset with the overrides), and the mean over joints. The last
line splits ReConForM's change over copy-rotations into the joints where it brings the joint's jerk closer
to the source's own and the joints where it moves away from it.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", nargs="?", default="kick")
    ap.add_argument("overrides", nargs="?", default="{}")
    ap.add_argument("--max-frames", type=int, default=400)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    import numpy as np
    import torch
    from tools import bench
    torch.set_num_threads(args.threads)
    mods = bench.enable_addon()
    met, solver = mods["core.metrics"], mods["core.solver"]
    loader = bench.Loader(mods, lambda s: None)
    clip, target, first, count = next(c for c in bench.CASES if args.case in c[0])
    src, smo, _ = loader.source(clip, first, count)
    smo = smo.slice(0, min(smo.num_frames, args.max_frames))
    _, tgt, _ = loader.character(target)
    init = mods["core.copy_rotations"].copy_rotations(src, smo, tgt)
    overrides = ast.literal_eval(args.overrides)
    settings = solver.SolverSettings.preset("balanced", num_threads=args.threads, **overrides)
    res = solver.SolveJob(src, smo, tgt, init, settings).run()
    tracks = {"source": (met._track(src, smo), float(src.height)),
              "copy-rot": (met._track(tgt, init), float(tgt.height)),
              "ReConForM": (met._track(tgt, res), float(tgt.height))}
    common = [n for n in tracks["copy-rot"][0].joint_names if n in tracks["source"][0].joint_names]
    per = {}
    for label, (tr, h) in tracks.items():
        cols = [tr.joint_names.index(n) for n in common]
        per[label] = met.jerk_magnitude(tr.joints[:, cols], smo.fps).mean(0) / h      # (J,)
    print(f"{pathlib.Path(clip).stem} -> {pathlib.Path(target).stem}, {smo.num_frames} frames at {smo.fps:g} "
          f"fps, overrides {overrides}")
    print("joint | source | copy-rot | ReConForM | ReConForM − copy-rot  (mean jerk / h_c, 1/s³)")
    for j, name in enumerate(common):
        s, a, b = (per[k][j] for k in ("source", "copy-rot", "ReConForM"))
        print(f"{name} | {s:.1f} | {a:.1f} | {b:.1f} | {b - a:+.1f}")
    s, a, b = (per[k] for k in ("source", "copy-rot", "ReConForM"))
    print(f"mean | {s.mean():.1f} | {a.mean():.1f} | {b.mean():.1f} | {b.mean() - a.mean():+.1f}  "
          f"(ratio to the source: copy-rot {a.mean() / s.mean():.3f}, ReConForM {b.mean() / s.mean():.3f})")
    toward = np.abs(b - s) < np.abs(a - s)
    d = b - a
    print(f"change over copy-rot, summed over joints: {d.sum():+.1f}; on the {int(toward.sum())} joints it brings "
          f"closer to the source's jerk {d[toward].sum():+.1f}, on the {int((~toward).sum())} others "
          f"{d[~toward].sum():+.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
