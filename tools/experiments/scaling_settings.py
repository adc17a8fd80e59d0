"""The bench's scaling case (tools/bench/run.py SCALING: a walk ping-pong tiled to N frames onto mh_female_average,
'balanced', no metrics, as the scaling line times it) with SolverSettings variants, interleaved in one process
(variant A, B, ..., then again), so that two settings are compared under the same load (docs/solver.md).

    .venv/bin/python tools/experiments/scaling_settings.py "[{}, {'w_self_barrier': 1.0}]" [--frames 1000]
        [--repeats 2] [--threads 2]
"""

from __future__ import annotations

import argparse
import ast
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", nargs="?", default="[{}]")
    ap.add_argument("--frames", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(args.threads)
    import common
    mods, src, mo, tgt = common.scaling_case(args.frames)
    variants = ast.literal_eval(args.variants)
    solver = mods["core.solver"]
    seconds = [[] for _ in variants]
    for _ in range(args.repeats):
        for k, v in enumerate(variants):
            settings = solver.SolverSettings.preset("balanced", num_threads=args.threads, **v)
            t = time.perf_counter()
            common.retarget(mods, src, mo, tgt, settings, metrics=False)
            seconds[k].append(time.perf_counter() - t)
    base = min(seconds[0])
    print(f"{pathlib.Path(common.SCALING[0]).stem} tiled to {args.frames} frames -> "
          f"{pathlib.Path(common.SCALING[1]).stem}, {args.threads} threads, load average "
          f"{os.getloadavg()[0]:.1f}")
    print("variant | seconds (each run) | best | f/s | best / first variant's best")
    for v, s in zip(variants, seconds):
        print(f"{v} | {', '.join(f'{x:.2f}' for x in s)} | {min(s):.2f} | {args.frames / min(s):.0f} | "
              f"{min(s) / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
