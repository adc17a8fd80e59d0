"""Where a solver step's host time goes on a GPU, reproducible or not (docs/solver.md "GPU"): the bench's scaling
case (a pickle from ``tools/bench/bench_gpu.py --save-case``) set up as the product runs it, a few untimed steps (the
pose map's CUDA graph is recorded at the end of the set-up), then ``--steps`` steps timed, and the same steps under
``torch.profiler`` (CPU activity only: the host's dispatch, which bounds a launch-bound step): the operators with
the most self time, per step.

    python3 tools/experiments/gpu_step_profile.py --case .whl/case.pkl [--frames 1000] [--steps 10] [--top 15]
        [--device cuda] [--set NAME=VALUE]

Each of ``core.solver.optim.DETERMINISTIC`` True (the default: torch's deterministic algorithms) and False is run in
turn, in one process. Without CUDA, ``--device cpu`` runs the same on the CPU (the switch is then never set: both
rows alike).
"""

from __future__ import annotations

import argparse
import pathlib
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
    ap.add_argument("--frames", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--set", action="append", default=[], help="solver setting override NAME=VALUE (repeatable)")
    args = ap.parse_args(argv)
    import torch
    from torch.profiler import ProfilerActivity, profile
    case = bench_gpu.load_case(args.case, args.threads)
    from bench import setting_overrides, tile
    from core.pipeline import retarget as rt
    from core.solver import SolverSettings
    from core.solver.optim import deterministic
    from core.types import Motion
    clip = tile(Motion, case["motion"], args.frames)
    base = SolverSettings.preset("balanced", device=args.device, **setting_overrides(args.set))
    cuda = args.device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    print(f"{case['case'][0]} tiled to {args.frames} frames -> {case['case'][1]}, on "
          f"{bench_gpu.device_label(args.device)}")
    per_op = {}
    for det in (True, False):
        with bench_gpu.constant(rt, "solver.optim.DETERMINISTIC", det):
            run = rt.Retarget(case["source"], clip, case["target"],
                              rt.RetargetOptions(settings=base, metrics=False, conflicts=False))
            job = None
            for _ in run.steps():                               # the set-up and 5 steps, untimed
                job = getattr(run, "job", None)
                if job is not None and job._step >= 5:
                    break
            with deterministic(job.device):
                sync()
                t = time.perf_counter()
                for _ in range(args.steps):
                    job._adam_step()
                sync()
                ms = (time.perf_counter() - t) / args.steps * 1e3
                with profile(activities=[ProfilerActivity.CPU]) as prof:
                    for _ in range(args.steps):
                        job._adam_step()
                    sync()
        ka = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
        total = sum(e.self_cpu_time_total for e in ka) / args.steps / 1e3
        print(f"\ndeterministic={det}: {ms:.1f} ms a step (pose graphed: {job.stats.get('cuda_graph')}); under the "
              f"profiler {total:.1f} ms of operators' self time a step; the top {args.top}:")
        for e in ka[:args.top]:
            print(f"  {e.key[:48]:48s} {e.count / args.steps:7.1f} calls {e.self_cpu_time_total / args.steps / 1e3:7.2f} ms")
        per_op[det] = {e.key: (e.count / args.steps, e.self_cpu_time_total / args.steps / 1e3) for e in ka}
    keys = set(per_op[True]) | set(per_op[False])
    diff = sorted(keys, key=lambda k: -(per_op[True].get(k, (0, 0))[1] - per_op[False].get(k, (0, 0))[1]))
    print(f"\nwhat the deterministic step spends more (calls and ms a step, deterministic / not), the top {args.top}:")
    for k in diff[:args.top]:
        (c1, t1), (c0, t0) = per_op[True].get(k, (0, 0)), per_op[False].get(k, (0, 0))
        print(f"  {k[:48]:48s} {c1:7.1f} / {c0:7.1f} calls {t1:7.2f} / {t0:7.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
