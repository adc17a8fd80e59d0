"""The surface barrier read densely (every frame, probe and field with gradients) against its sparse read (the
entries deeper than their allowance only, ``core.solver.surface.SurfaceBarrier``), alternated in one process on
bench cases: seconds per retarget (copy-rotations and the solve, no metrics) and how far the results differ,
beside float32 against float64 of the dense read (the rounding the sparse read must stay within).

    OMP_NUM_THREADS=1 .venv/bin/python tools/experiments/surface_read.py [--cases 0 1 5] [--repeat 2]

Cases are ``tools/bench/common.py``'s CASES (indices); ../shared/assets needed. Prints per case the seconds of each
repeat of each read, then the largest, 99th-percentile and median bone-rotation difference (degrees) and the
largest root difference (mm) of sparse32 against dense32 and of dense32 against dense64.
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, nargs="+", default=[0, 1, 5])
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    import common
    import torch
    torch.set_num_threads(1)
    mods = common.enable_addon()
    surface = importlib.import_module(f"{common.MODULE}.core.solver.surface")
    job = importlib.import_module(f"{common.MODULE}.core.solver.job")
    sparse = surface.SurfaceBarrier.weighted

    def dense(self, points):
        d = surface.surface_depths(self.fields, points, self.grid)
        return self.weight * torch.relu(d - self.allow).square().sum() / (points.shape[0] * self.unit)

    loader = common.Loader(mods, lambda s: None)
    settings = mods["core.solver"].SolverSettings.preset("balanced", num_threads=1)

    def solve(read, s):
        surface.SurfaceBarrier.weighted = read
        t = time.perf_counter()
        motion = common.retarget(mods, src, clip, tgt, s, metrics=False).motion
        return time.perf_counter() - t, motion

    def differ(a, b) -> str:
        ang = 2 * np.degrees(np.arccos(np.clip(np.abs((a.rotations * b.rotations).sum(-1)), 0, 1)))
        return (f"max {ang.max():.3f}°, p99 {np.percentile(ang, 99):.3f}°, median {np.median(ang):.4f}°, root "
                f"{np.abs(a.locations - b.locations).max() * 1000:.2f} mm")

    for case in args.cases:
        srel, trel, first, count = common.CASES[case]
        src, clip, _ = loader.source(srel, first, count)
        _, tgt, _ = loader.character(trel)
        seconds, results = {"dense": [], "sparse": []}, {}
        for _ in range(args.repeat):
            for name, read in (("dense", dense), ("sparse", sparse)):
                t, results[name] = solve(read, settings)
                seconds[name].append(t)
        dtype, job.DTYPE = job.DTYPE, "float64"
        _, d64 = solve(dense, settings)
        job.DTYPE = dtype
        surface.SurfaceBarrier.weighted = sparse
        ratio = np.median(seconds["sparse"]) / np.median(seconds["dense"])
        print(f"{pathlib.Path(srel).stem} -> {pathlib.Path(trel).stem} ({clip.num_frames} frames): dense "
              f"{', '.join(f'{t:.2f}' for t in seconds['dense'])} s, sparse "
              f"{', '.join(f'{t:.2f}' for t in seconds['sparse'])} s (sparse / dense {ratio:.2f})\n"
              f"  sparse32 vs dense32: {differ(results['sparse'], results['dense'])}\n"
              f"  dense32 vs dense64:  {differ(results['dense'], d64)}", flush=True)
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
