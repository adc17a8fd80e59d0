"""How far rounding alone moves the scaling case's solve, on the CPU and on a GPU (docs/solver.md "GPU"): the same
clip solved in float32 on the CPU with ``--threads`` and with one thread (torch sums in another order), in float64 on
the CPU, and in float32 on ``--device`` (reproducible); the bone-rotation angles between each pair (largest / 99.9th
percentile / mean over every frame and bone, as ``tools/bench/bench_gpu.py``), the frame and bone of the largest GPU–CPU
difference, per setting variant.

    python3 tools/experiments/gpu_rounding.py --case .whl/case.pkl [--frames 75,1000] [--threads 16]
        [--variants '[{}, {"jerk_budget": 0}]']
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))


def main(argv=None) -> int:
    import bench_gpu
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_gpu.case_arguments(ap)
    ap.add_argument("--frames", default="75,1000")
    ap.add_argument("--variants", default='[{}, {"jerk_budget": 0}]', help="a JSON list of SolverSettings overrides")
    args = ap.parse_args(argv)
    case = bench_gpu.load_case(args.case, args.threads)
    import numpy as np
    import torch
    from bench import tile
    from core.pipeline import retarget as rt
    from core.solver import SolverSettings
    from core.types import Motion
    threads = torch.get_num_threads()
    names = case["target"].skeleton.names
    print(f"{case['case'][0]} -> {case['case'][1]}; CPU {threads} threads and 1; device "
          f"{bench_gpu.device_label(args.device)}")
    fmt = bench_gpu._fmt
    for over in json.loads(args.variants):
        base = SolverSettings.preset("balanced", **over)
        for n in (int(x) for x in args.frames.split(",") if x):
            clip = tile(Motion, case["motion"], n)
            solve = lambda s: bench_gpu._retarget(rt, case["source"], clip, case["target"], s).motion.rotations
            cpu = solve(base)
            torch.set_num_threads(1)
            cpu1 = solve(base)
            torch.set_num_threads(threads)
            with bench_gpu.constant(rt, "solver.job.DTYPE", "float64"):
                f64 = solve(base)
            gpu = solve(dataclasses.replace(base, device=args.device))
            ang = bench_gpu.angles_deg(gpu, cpu)
            t, j = np.unravel_index(int(ang.argmax()), ang.shape)
            bone = names[j]
            print(f"{over} {n} frames: GPU vs CPU {fmt(bench_gpu.spread(gpu, cpu))}; GPU vs CPU float64 "
                  f"{fmt(bench_gpu.spread(gpu, f64))}; CPU vs CPU float64 {fmt(bench_gpu.spread(cpu, f64))}; "
                  f"CPU {threads} threads vs 1 {fmt(bench_gpu.spread(cpu, cpu1))}; largest GPU-CPU at frame {t}, "
                  f"bone {bone}; frames with a bone over 0.5° GPU-CPU: {int((ang.max(1) > 0.5).sum())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
