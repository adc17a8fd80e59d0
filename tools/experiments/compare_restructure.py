"""The same retargets by the code of another checkout (``--baseline``, e.g. the commit before a restructure)
and by this checkout, interleaved in one process: time per run and the largest differences of the results.

    git worktree add /tmp/baseline 05c4f6e
    .venv/bin/python tools/experiments/compare_restructure.py --baseline /tmp/baseline [--frames 75 300 1000]
        [--repeat 3] [--threads 2] [--case motions/NC_bandai_kick_normal_001.bvh characters/mh_teen_girl.glb]

Both checkouts are enabled as separate extensions (bl_ext.reconform_old / bl_ext.reconform_new), each
prepares its own characters from the same imported armatures, and each frame count of make bench's scaling
clip (NC_bandai_walk_giant_001, ping-pong tiled, onto mh_female_average; or ``--case`` source and target, paths
in ../shared/assets) is retargeted ``--repeat`` times by
each side in turn (old, new, old, new, ...): a machine busy for a while slows both. Timed: copy-rotations plus
the solve (set-up included), no metrics — the new side through core.pipeline.retarget, the old one as its bench timed
it. Printed: the median seconds of each side, their ratio, the largest bone-rotation angle (degrees) and
hips-location difference (mm) between the two results, and each side's solver split into set-up and Adam steps
(its ``stats``). ``--new-first`` swaps the order within each repeat (the side timed second is favoured).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="path of the other checkout")
    ap.add_argument("--frames", type=int, nargs="+", default=[75, 300])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--new-first", action="store_true",
                    help="run this checkout first in each repeat (one process favours the side timed second)")
    ap.add_argument("--case", nargs=2, metavar=("SOURCE", "TARGET"), default=None,
                    help="source clip and target character under ../shared/assets (default: the scaling line's)")
    args = ap.parse_args(argv)
    os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="reconform_bl_"))
    import numpy as np
    import torch
    import common  # tools/bench/run.py: SCALING, ASSETS, tile

    torch.set_num_threads(args.threads)
    from extension import enable_addon
    old = enable_addon("reconform_old", pathlib.Path(args.baseline))[0].__name__
    new = enable_addon("reconform_new")[0].__name__

    def m(prefix, name):
        return importlib.import_module(f"{prefix}.{name}")
    br = m(new, "reconform_addon.bridge")
    case = args.case or common.SCALING[:2]
    src_arm = br.find_armature(br.import_file(str(common.ASSETS / case[0])))
    tgt_arm = br.find_armature(br.import_file(str(common.ASSETS / case[1])))
    sides = {}
    for label, prefix in (("old", old), ("new", new)):
        pipe = m(prefix, "reconform_addon.pipeline")
        src = pipe.prepare_character(src_arm, keyvert_count=41, fit_body=True)
        tgt = pipe.prepare_character(tgt_arm, keyvert_count=41)
        clip = m(prefix, "reconform_addon.bridge").read_motion(src_arm, src.skeleton)
        sides[label] = (prefix, src, tgt, clip)

    def run(label, frames):
        prefix, src, tgt, clip = sides[label]
        mo = common.tile(m(prefix, "core.types").Motion, clip, frames)
        settings = m(prefix, "core.solver").SolverSettings(num_threads=args.threads)
        t = time.perf_counter()
        if label == "new":
            rt = m(prefix, "core.pipeline.retarget")
            out = rt.run(rt.Retarget(src, mo, tgt, rt.RetargetOptions(settings=settings, metrics=False,
                                                                       conflicts=False)))
            res, stats = out.motion, out.solver_stats
        else:
            init = m(prefix, "core.pipeline.copy_rotations").copy_rotations(src, mo, tgt)
            job = m(prefix, "core.solver").SolveJob(src, mo, tgt, init, settings)
            res, stats = job.run(), job.stats
        # the solver's own split: its set-up (source paths, pairs, scales) and its Adam steps
        return time.perf_counter() - t, res, (stats.get("setup_s", float("nan")), stats.get("solve_s", float("nan")))

    print(f"torch {torch.__version__}, {args.threads} threads, {os.cpu_count()} CPUs; baseline {args.baseline}; "
          f"{case[0]} -> {case[1]}")
    order = ("new", "old") if args.new_first else ("old", "new")
    print(f"each repeat runs {' then '.join(order)}; set-up / steps: the solver's own split, medians")
    print("frames | old median s | new median s | new / old | largest rotation difference ° | hips difference mm "
          "| old set-up / steps s | new set-up / steps s")
    for n in args.frames:
        times = {"old": [], "new": []}
        split = {"old": [], "new": []}
        res = {}
        for _ in range(args.repeat):
            for label in order:
                dt, res[label], parts = run(label, n)
                times[label].append(dt)
                split[label].append(parts)
        a, b = res["old"], res["new"]
        dots = np.abs((a.rotations * b.rotations).sum(-1)).clip(0.0, 1.0)
        angle = float(np.degrees(2.0 * np.arccos(dots)).max())
        hips = sides["new"][2].skeleton.index(sides["new"][2].bone_map["hips"])
        dloc = float(np.abs(a.locations[:, hips] - b.locations[:, hips]).max()) * 1000
        to, tn = statistics.median(times["old"]), statistics.median(times["new"])
        parts = {k: " / ".join(f"{statistics.median(x):.2f}" for x in zip(*v)) for k, v in split.items()}
        print(f"{n} | {to:.2f} | {tn:.2f} | {tn / to:.2f} | {angle:.3f} | {dloc:.2f} | {parts['old']} | "
              f"{parts['new']}", flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (1 min)")
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
