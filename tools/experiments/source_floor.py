"""Which floor the source's feet are read above (docs/metrics.md "Whose floor", docs/solver.md "Ground"): per clip,
the solve with each ``source_ground`` and copy-rotations, each measured against two ground truths: the source's
feet above z = 0, and above the source's own floor (``core.contacts.ground.auto_ground``: z = 0 where the clip stands on
it, else its tracked level).

    .venv/bin/python tools/experiments/source_floor.py [--modes zero,estimate,track] [--max-frames 400]
        [--cases walk,salsa] [--threads 1]

Cases: tools/bench/run.py's, then ``EXTRA`` (other shared clips onto other characters). Per case it prints the
floor ``auto_ground`` reads (z = 0, or the tracked level's mean and range), the fitted body's planted soles above
z = 0 (``core.contacts.ground.planted_soles`` before the fit moves them: a body's error, not the floor's), and per
method grounded F1 / foot-locked F1 / floor penetration under each reading. ``auto`` is not solved: it is the ``zero``
or ``track`` solve, whichever ``auto_ground`` picks. Every retarget goes through core.pipeline.retarget, as the
product's.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

#: (source clip, target character, first frame, frame count or None): shared clips the bench does not use
EXTRA = [
    ("motions/NC_bandai_walk_giant_001.bvh", "characters/mh_female_average.glb", 0, None),
    ("motions/cmu_01_01_playground_jumps.fbx", "characters/mh_teen_girl.glb", 1, None),
    ("motions/cmu_09_11_run.fbx", "characters/mh_male_heavy.glb", 1, None),
    ("motions/cmu_salsa_61_05_follow.bvh", "characters/mh_female_curvy_mixamorig.glb", 0, None),
]
KEYS = ("grounded_f1", "locked_f1", "floor_pen_mean")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", default="zero,estimate,track")
    ap.add_argument("--max-frames", type=int, default=400)
    ap.add_argument("--cases", default="")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    import numpy as np
    import torch
    from tools.bench import common as bench
    torch.set_num_threads(args.threads)
    mods = bench.enable_addon()
    M = lambda name: __import__(f"{bench.MODULE}.{name}", fromlist=["x"])   # noqa: E731
    rt, solver, ground, metrics, track_mod = (M(n) for n in ("core.pipeline.retarget", "core.solver", "core.contacts.ground",
                                                              "core.metrics.scores", "core.character.track"))
    loader = bench.Loader(mods, lambda s: None)
    modes = [m for m in args.modes.split(",") if m]
    wanted = [w for w in args.cases.split(",") if w]
    rows = []
    print("case | auto floor | method | " + " | ".join(f"{k} (z = 0 / own floor)" for k in KEYS))
    for clip, target, first, count in bench.CASES + EXTRA:
        if wanted and not any(w in clip for w in wanted):
            continue
        src, smo, _ = loader.source(clip, first, count)
        smo = smo.slice(0, min(smo.num_frames, args.max_frames))
        _, tgt, _ = loader.character(target)
        track = track_mod.ClipTrack(src, smo)
        own = ground.auto_ground(track)
        picks = "track" if np.ndim(own) else "zero"
        floor = (f"track {100 * np.mean(own):+.1f} cm (range {100 * np.ptp(own):.1f})" if np.ndim(own)
                 else "z = 0")
        name = f"{pathlib.Path(clip).stem[:26]} → {pathlib.Path(target).stem[:18]}"
        results = {}
        for mode in modes:
            settings = solver.SolverSettings.preset("balanced", num_threads=args.threads, source_ground=mode)
            o = rt.run(rt.Retarget(src, smo, tgt, rt.RetargetOptions(settings=settings, metrics=False,
                                                                     conflicts=False)))
            if not results:
                results["copy-rot"] = o.init_motion
            results[mode] = o.motion
        if picks in results:
            results["auto"] = results[picks]
        row = {}
        for method, motion in results.items():
            tt = track_mod.ClipTrack(tgt, motion)
            m0 = metrics.evaluate(src, smo, tgt, motion, source_ground=0.0, source_track=track, target_track=tt)
            m1 = metrics.evaluate(src, smo, tgt, motion, source_ground=own, source_track=track, target_track=tt)
            row[method] = (m0, m1)
            print(f"{name} | {floor} | {method} | "
                  + " | ".join(f"{m0[k]:.3f} / {m1[k]:.3f}" if "f1" in k else f"{100 * m0[k]:.3f} %"
                               for k in KEYS), flush=True)
        rows.append(row)
    print()
    print("mean over cases | method | " + " | ".join(f"{k} (z = 0 / own floor)" for k in KEYS))
    for method in rows[0]:
        vals = [[r[method][i][k] for r in rows if method in r] for i in (0, 1) for k in KEYS]
        print(f"mean | {method} | " + " | ".join(
            f"{np.nanmean(vals[j]):.3f} / {np.nanmean(vals[len(KEYS) + j]):.3f}" if "f1" in k
            else f"{100 * np.nanmean(vals[j]):.3f} %" for j, k in enumerate(KEYS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
