"""Solver variants: one line per case and variant, then the mean over cases, for the metrics that decide the
solver's defaults (docs/solver.md).

    .venv/bin/python tools/experiments/solver_variants.py "[{}, {'w_sliding': 1}]" [--cases kick,salsa]
        [--max-frames 400] [--threads 1] [--stride 2]
    .venv/bin/python tools/experiments/solver_variants.py "[{}]" --synthetic --const
    core.solver.parametrisation.KNOT_SPACING=0 .venv/bin/python tools/experiments/solver_variants.py "[{}]" --const
    core.solver.bulges.BULGE_POINTS=0

Each variant is a dict of SolverSettings overrides of the 'balanced' preset. Cases are tools/bench/run.py's
(../shared/assets; characters prepared once by its loader), or with ``--synthetic`` the synthetic pair of
tests/core/synth.py (no assets, about a minute). Every retarget goes through core.pipeline.retarget, as the product's;
copy-rotations is its baseline, measured against the same source labels (above the floor the solve used).
Timings are not the point here (``make bench``). ``--const module.NAME=VALUE`` (repeatable) sets a module constant of
the package the cases run in (e.g. ``core.solver.bulges.BULGE_POINTS``) for every variant of the run.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

KEYS = ("floor_pen_mean", "grounded_f1", "locked_f1", "contact_f1", "self_pen_mean", "jerk_mean", "jerk_ratio_h",
        "head_turn_mean", "head_turn_max")


def cells(metrics: dict) -> str:
    """The KEYS columns of one row ('nan' where a metric is absent, such as the head's turn without head key
    vertices)."""
    return " | ".join(f"{metrics.get(k, float('nan')):.4g}" for k in KEYS)


def with_jerk_ratio(m: dict, h_src: float, h_tgt: float) -> dict:
    """``m`` plus ``jerk_ratio_h`` = (jerk / h_tgt) / (source jerk / h_src), the bench's per-unit-height ratio."""
    return dict(m, jerk_ratio_h=m["jerk_mean"] / h_tgt / max(m["source_jerk_mean"] / h_src, 1e-12))


def synthetic_cases(frames: int):
    """[(name, source, clip, target)] of the synthetic pair (core only, no Blender)."""
    from tests.core.synth import make_humanoid, walk_motion
    src = make_humanoid()
    tgt = make_humanoid(scale=0.8, girth=1.6, leg=0.8, name="tgt")
    return [("synthetic walk+clap", src, walk_motion(src, frames=frames, clap=True), tgt)]


def bench_cases(args):
    """[(name, source, clip, target)] of tools/bench/run.py's cases whose clip name contains one of --cases."""
    from tools.bench import common as bench
    mods = bench.enable_addon()
    loader = bench.Loader(mods, lambda s: None)
    wanted = [w for w in args.cases.split(",") if w]
    out = []
    for clip, target, first, count in bench.CASES:
        if wanted and not any(w in clip for w in wanted):
            continue
        src, smo, _ = loader.source(clip, first, count)
        _, tgt, _ = loader.character(target)
        if args.stride > 1:                 # the same capture at a lower frame rate: every N-th frame
            smo = type(smo)(smo.rotations[::args.stride], smo.locations[::args.stride], smo.fps / args.stride,
                            smo.frame_start)
        out.append((pathlib.Path(clip).stem[:24], src, smo.slice(0, min(smo.num_frames, args.max_frames)), tgt))
    return out, mods["core.pipeline.retarget"], mods["core.solver"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", nargs="?", default="[{}]")
    ap.add_argument("--synthetic", action="store_true", help="the synthetic pair of tests/core (no assets)")
    ap.add_argument("--max-frames", type=int, default=400, help="first frames of each clip (speed)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cases", default="", help="comma-separated substrings of clip names (default: all cases)")
    ap.add_argument("--stride", type=int, default=1, help="every N-th frame of each clip, at its frame rate / N "
                    "(a 120 fps capture as 60 or 40 fps)")
    ap.add_argument("--const", action="append", default=[], metavar="MODULE.NAME=VALUE",
                    help="a module constant for the whole run, e.g. core.solver.bulges.BULGE_POINTS=0")
    args = ap.parse_args(argv)
    variants = ast.literal_eval(args.variants)
    import numpy as np
    import torch
    torch.set_num_threads(args.threads)
    if args.synthetic:
        from core.pipeline import retarget as rt
        from core import solver
        cases = synthetic_cases(min(args.max_frames, 150))
    else:
        cases, rt, solver = bench_cases(args)
    if args.const:
        from tools.bench import common as bench
        bench.set_constants(args.const, package="" if args.synthetic else bench.MODULE)
    rows = {i: [] for i in range(-1, len(variants))}
    print("case | variant | seconds | " + " | ".join(KEYS))
    for name, src, smo, tgt in cases:
        hs, ht = float(src.height), float(tgt.height)
        for i, v in enumerate(variants):
            settings = solver.SolverSettings.preset("balanced", num_threads=args.threads, **v)
            o = rt.run(rt.Retarget(src, smo, tgt, rt.RetargetOptions(settings=settings, conflicts=False)))
            m = with_jerk_ratio(o.metrics, hs, ht)
            c = with_jerk_ratio(o.reference, hs, ht)   # copy-rotations against the same source labels
            if i == 0:
                rows[-1].append(c)
                print(f"{name} | copy-rot | - | " + cells(c), flush=True)
            elif np.any(np.asarray(o.source_ground) != 0.0):
                print(f"{name} | copy-rot, source floor of {v} | - | " + cells(c))
            rows[i].append(m)
            print(f"{name} | {v or 'defaults'} | {o.timings['solve_s']:.2f} | "
                  + cells(m), flush=True)
    print()
    print("mean over cases | variant | " + " | ".join(KEYS))
    for i in range(-1, len(variants)):
        label = "copy-rot" if i < 0 else str(variants[i] or "defaults")
        print(f"mean | {label} | " + cells({k: np.nanmean([r.get(k, np.nan) for r in rows[i]]) for k in KEYS}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
