"""Solver variants on the real bench cases (tools/bench.py CASES, ../shared/assets): one line per case and
variant, then the mean over cases, for the metrics that decide the foot/floor settings.

    .venv/bin/python tools/solver_variants.py "[{}, {'scale_floor_terms': False}, {'w_sliding': 1}]" [--max-frames 400]
        [--cases kick,salsa] [--threads 1]

Each variant is a dict of SolverSettings overrides of the 'balanced' preset; copy-rotations is the first row
of each case. Characters are prepared once (tools/bench.py Loader). Timings are not the point here (see
``make bench``). The source's labels are read above the floor each solve used (``source_ground``); where
that is not z = 0, copy-rotations is measured again against the same labels.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KEYS = ("floor_pen_mean", "grounded_f1", "locked_f1", "contact_f1", "self_pen_mean", "jerk_mean", "jerk_ratio_h")


def with_jerk_ratio(m: dict, h_src: float, h_tgt: float) -> dict:
    """``m`` plus ``jerk_ratio_h`` = (jerk / h_tgt) / (source jerk / h_src), the bench's per-unit-height ratio."""
    return dict(m, jerk_ratio_h=m["jerk_mean"] / h_tgt / max(m["source_jerk_mean"] / h_src, 1e-12))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", nargs="?", default="[{}]")
    ap.add_argument("--max-frames", type=int, default=400, help="first frames of each clip (speed)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cases", default="", help="comma-separated substrings of clip names (default: all cases)")
    args = ap.parse_args(argv)
    variants = ast.literal_eval(args.variants)
    import numpy as np
    import torch
    from tools import bench
    torch.set_num_threads(args.threads)
    mods = bench.enable_addon()
    solver, metrics = mods["core.solver"], mods["core.metrics"]
    loader = bench.Loader(mods, lambda s: None)
    rows = {i: [] for i in range(-1, len(variants))}
    print("case | variant | " + " | ".join(KEYS))
    wanted = [w for w in args.cases.split(",") if w]
    for clip, target, first, count in bench.CASES:
        if wanted and not any(w in clip for w in wanted):
            continue
        src, smo, _ = loader.source(clip, first, count)
        smo = smo.slice(0, min(smo.num_frames, args.max_frames))
        _, tgt, _ = loader.character(target)
        init = mods["core.copy_rotations"].copy_rotations(src, smo, tgt)
        name = pathlib.Path(clip).stem[:24]
        hs, ht = float(src.height), float(tgt.height)
        m = with_jerk_ratio(metrics.evaluate(src, smo, tgt, init), hs, ht)
        rows[-1].append(m)
        print(f"{name} | copy-rot | " + " | ".join(f"{m[k]:.4g}" for k in KEYS), flush=True)
        for i, v in enumerate(variants):
            job = solver.SolveJob(src, smo, tgt, init, solver.SolverSettings.preset("balanced",
                                                                                  num_threads=args.threads, **v))
            res = job.run()
            ground = job.source_ground_level       # the source's labels: above the floor this solve used
            m = with_jerk_ratio(metrics.evaluate(src, smo, tgt, res, source_ground=ground), hs, ht)
            rows[i].append(m)
            if np.any(np.asarray(ground) != 0.0):  # copy-rotations against the same labels
                c = with_jerk_ratio(metrics.evaluate(src, smo, tgt, init, source_ground=ground), hs, ht)
                print(f"{name} | copy-rot, source floor of {v} | " + " | ".join(f"{c[k]:.4g}" for k in KEYS))
            print(f"{name} | {v} | " + " | ".join(f"{m[k]:.4g}" for k in KEYS), flush=True)
    print()
    print("mean over cases | variant | " + " | ".join(KEYS))
    for i in range(-1, len(variants)):
        label = "copy-rot" if i < 0 else str(variants[i])
        print(f"mean | {label} | " + " | ".join(f"{np.nanmean([r[k] for r in rows[i]]):.4g}" for k in KEYS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
