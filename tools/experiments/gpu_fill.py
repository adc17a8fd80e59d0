"""Torch's fill of new tensors under its deterministic algorithms, on and off, back to back on a GPU
(``core.solver.optim.FILL_UNINITIALIZED``; docs/solver.md "GPU"): the bench's scaling case (a pickle from
``tools/bench/bench_gpu.py --save-case``), the whole retarget (copy-rotations, set-up, solve; reproducible) at each
length, alternating fill on / off ``--repeat`` times after an untimed warm-up: median seconds and frames/s of
each, and whether the two results are identical bit for bit.

    python3 tools/experiments/gpu_fill.py --case .whl/case.pkl [--frames 75,1000] [--repeat 3] [--device cuda]
        [--const core.solver.graphed.GRAPH_TERMS]

``--const`` switches another boolean constant of core the same way (on = True), named in the lines instead of
"fill": ``core.solver.graphed.GRAPH_TERMS``, the dense terms recorded in the GPU's graph with the pose map.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

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
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--const", default="core.solver.optim.FILL_UNINITIALIZED",
                    help="the boolean module constant switched (default: torch's fill of new tensors)")
    args = ap.parse_args(argv)
    import importlib
    case = bench_gpu.load_case(args.case, args.threads)
    from bench import tile
    from core.pipeline import retarget as rt
    from core.solver import SolverSettings
    from core.types import Motion
    module, _, name = args.const.rpartition(".")
    switched = importlib.import_module(module)
    label = "fill" if args.const == "core.solver.optim.FILL_UNINITIALIZED" else name
    default = getattr(switched, name)
    settings = SolverSettings.preset("balanced", device=args.device)
    cuda = args.device.startswith("cuda")
    print(f"{case['case'][0]} -> {case['case'][1]}, reproducible, on {bench_gpu.device_label(args.device)}")
    bench_gpu._retarget(rt, case["source"], tile(Motion, case["motion"], 75), case["target"],
                        SolverSettings.preset("balanced", device=args.device, iterations=2))   # warm-up
    for n in (int(x) for x in args.frames.split(",") if x):
        clip = tile(Motion, case["motion"], n)
        times, results = {True: [], False: []}, {}
        for _ in range(args.repeat):
            for on in (True, False):
                setattr(switched, name, on)
                res, dt, _ = bench_gpu._timed(rt, case["source"], clip, case["target"], settings, cuda)
                times[on].append(dt)
                results[on] = res.motion
        setattr(switched, name, default)
        on, off = statistics.median(times[True]), statistics.median(times[False])
        same = bench_gpu._identical(results[True], results[False])
        print(f"{n} frames: {label} on {on:.2f} s ({n / on:.0f} f/s), off {off:.2f} s ({n / off:.0f} f/s), "
              f"on / off {on / off:.2f}; results {'identical' if same else 'differ'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
