"""Live windows started from the last one (docs/solver.md "Live windows"): the objective and time of a window
after a scrub, started from the last window with several step shares and learning-rate shares, against the same
window solved from copy-rotations.

    .venv/bin/python tools/experiments/live_warm.py [--at 151 61 231] [--scrub 2 5 15]
        [--variants "[(0.15, 0.1), (0.15, 0.3), (0.25, 0.1)]"] [--fidelity]

With --fidelity: a window warm-started from its own result (no step moves it), from the result's 6D vectors and
from its rotations alone: the start's objective and its largest rotation difference from the result.

The case of `make bench`'s artist line (tools/bench/bench_artist.py: the Bandai kick tiled to 300 frames onto
mh_teen_girl, 'balanced', 75-frame windows, 1 thread). Each variant is (core.pipeline.live.WARM_FRACTION,
core.pipeline.live.WARM_LR). Printed per place: the cold window's objective over copy-rotations' and seconds, then each
variant's start → end objective and seconds per scrub.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--at", type=int, nargs="+", default=[151, 61, 231])
    ap.add_argument("--scrub", type=int, nargs="+", default=[2, 5, 15])
    ap.add_argument("--variants", default="[(0.15, 0.1), (0.15, 0.3), (0.25, 0.1)]")
    ap.add_argument("--fidelity", action="store_true",
                    help="only: a window restarted from its own result, with and without its 6D vectors")
    args = ap.parse_args(argv)
    import common
    import bench_artist
    mods, src, tgt, motion = bench_artist.issue_case(300, threads=1)
    rt = mods["core.pipeline.retarget"]
    live_mod = importlib.import_module(f"{common.MODULE}.core.pipeline.live")
    settings = mods["core.solver"].SolverSettings.preset("balanced", num_threads=1)
    live = live_mod.LiveClip(src, motion, tgt, rt.RetargetOptions(settings=settings, metrics=False,
                                                                 conflicts=False), length=75)
    rt.run(live.prepare())
    variants = ast.literal_eval(args.variants)
    print(f"load average {os.getloadavg()[0]:.1f}; 75-frame windows of {pathlib.Path(bench_artist.CASE[0]).stem} "
          f"(300 frames) -> {pathlib.Path(bench_artist.CASE[1]).stem}, 1 thread")

    def solve(frame, previous=None):
        start = []
        job = live.solve(frame, previous)
        for s in job.steps():
            if s.solver is not None and not start:
                start.append(s.solver.relative)
        return start[0], job.outcome
    if args.fidelity:     # a window started from its own result: how closely the warm start reproduces it
        import dataclasses
        import numpy as np
        live_mod.WARM_LR = 1e-9                  # the steps do not move it: the start is what is measured
        last = solve(motion.frame_start + args.at[0])[1]
        names = tgt.skeleton.names
        param = importlib.import_module(f"{common.MODULE}.core.solver.parametrisation")
        refit = param.REFIT_ITERATIONS
        for how, prev, iterations in (
                ("the result's 6D vectors (warm_sixd)", last, refit),
                ("its rotations alone", dataclasses.replace(last, sixd=None), refit),
                ("its rotations alone, linear fit only (before refit_rotations)", dataclasses.replace(last, sixd=None),
                 0)):
            param.REFIT_ITERATIONS = iterations
            s0, w = solve(motion.frame_start + args.at[0], prev)
            param.REFIT_ITERATIONS = refit
            dots = np.abs((w.core_motion.rotations * last.core_motion.rotations).sum(-1)).clip(0.0, 1.0)
            ang = np.degrees(2.0 * np.arccos(dots))
            j = np.unravel_index(ang.argmax(), ang.shape)
            print(f"start from {how}: objective {s0:.3f} (the result's {last.relative:.3f}), largest rotation "
                  f"difference {ang.max():.2f}° ({names[j[1]]}, frame {j[0]})")
        return 0
    for at in args.at:
        _, last = solve(motion.frame_start + at)
        print(f"frame {motion.frame_start + at}: cold {last.relative:.3f} in {last.seconds:.2f} s")
        for frac, lr in variants:
            live_mod.WARM_FRACTION, live_mod.WARM_LR = frac, lr
            cells = []
            for scrub in args.scrub:
                s0, w = solve(motion.frame_start + at + scrub, last)
                cells.append(f"scrub {scrub}: {s0:.3f} -> {w.relative:.3f} in {w.seconds:.2f} s")
            print(f"  {frac:.0%} of the steps at {lr:.0%} rates | " + " | ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
