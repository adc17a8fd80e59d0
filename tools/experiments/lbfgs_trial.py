"""L-BFGS instead of Adam (issue 16: "a second-order or line-search method where it converges in fewer steps"): the
issue 16 case (the Bandai kick tiled to --frames onto mh_teen_girl, 'balanced', 1 thread) solved by the product's
120 Adam steps, then from the same start by torch.optim.LBFGS (strong Wolfe line search) in stages of a fixed α
(the mixing weight of the target's adaptive weights): seconds, objective evaluations, and the objective at α = 1
relative to copy-rotations' (``SolveJob.relative``, what the panel prints; lower is better).

    .venv/bin/python tools/experiments/lbfgs_trial.py [--frames 300] ["[(1.0, 60, 20)]"]

Each stage is (α, iterations, history size); the defaults run one stage at α = 1.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stages", nargs="?", default="[(1.0, 60, 20)]")
    ap.add_argument("--frames", type=int, default=300)
    args = ap.parse_args(argv)
    stages = ast.literal_eval(args.stages)
    import torch
    import common
    import bench_artist
    mods, src, tgt, motion = bench_artist.issue_case(args.frames, threads=1)
    rt, solver = mods["core.pipeline.retarget"], mods["core.solver"]
    job_mod = importlib.import_module(f"{common.MODULE}.core.solver.job")
    settings = solver.SolverSettings.preset("balanced", num_threads=1)
    first = rt.run(rt.Retarget(src, motion, tgt, rt.RetargetOptions(settings=settings, metrics=False,
                                                                     conflicts=False)))

    def fresh():
        job = job_mod.SolveJob(first.source, motion, first.target, first.init_motion, settings,
                               source_track=first.source_track)
        for _ in job.prepare():
            pass
        return job

    def objective(job) -> float:
        with torch.no_grad():
            return job.relative(float(sum(job.weighted_terms(1.0).values())), 1.0)

    job = fresh()
    t = time.perf_counter()
    with job._threads():
        while job._step < job.total:
            job._adam_step()
    print(f"Adam, {job.total} steps: {time.perf_counter() - t:.2f} s, objective at α = 1 {objective(job):.4f}")
    job = fresh()
    calls = [0]
    t = time.perf_counter()
    with job._threads():
        for alpha, iterations, history in stages:
            opt = torch.optim.LBFGS(job.param.params, lr=1.0, max_iter=iterations, history_size=history,
                                    line_search_fn="strong_wolfe")

            def closure():
                calls[0] += 1
                opt.zero_grad()
                loss = sum(job.weighted_terms(alpha).values()) * job.param.num_controls
                loss.backward()
                return loss
            opt.step(closure)
            print(f"L-BFGS stage α = {alpha} ({iterations} iterations, history {history}): {calls[0]} evaluations "
                  f"so far, {time.perf_counter() - t:.2f} s, objective at α = 1 {objective(job):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
