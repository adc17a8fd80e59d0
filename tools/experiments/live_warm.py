"""Live windows started from the last one (docs/solver.md "Live windows"): the objective and time of a window
after a scrub, started from the last window with several step shares and learning-rate shares, against the same
window solved from copy-rotations.

    .venv/bin/python tools/experiments/live_warm.py [--at 151 61 231] [--scrub 2 5 15]
        [--variants "[(0.15, 0.1), (0.15, 0.3), (0.25, 0.1)]"]

The case of `make bench`'s artist line (tools/bench_artist.py: the Bandai kick tiled to 300 frames onto
mh_teen_girl, 'balanced', 75-frame windows, 1 thread). Each variant is (core.live.WARM_FRACTION,
core.live.WARM_LR). Printed per place: the cold window's objective over copy-rotations' and seconds, then each
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--at", type=int, nargs="+", default=[151, 61, 231])
    ap.add_argument("--scrub", type=int, nargs="+", default=[2, 5, 15])
    ap.add_argument("--variants", default="[(0.15, 0.1), (0.15, 0.3), (0.25, 0.1)]")
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    import bench
    import bench_artist
    mods = bench.enable_addon()
    loader = bench.Loader(mods, lambda s: None)
    src, smo, _ = loader.source(bench_artist.CASE[0])
    _, tgt, _ = loader.character(bench_artist.CASE[1])
    motion = bench.tile(mods["core.types"].Motion, smo, 300)
    rt = mods["core.retarget"]
    live_mod = importlib.import_module(f"{bench.MODULE}.core.live")
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
    rc = main()
    sys.stdout.flush()
    os._exit(rc)
