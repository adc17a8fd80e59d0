"""L_pen and the self barrier apart, at copy-rotations and at the result (docs/solver.md "Pair
terms"): the progress reports the self barrier inside ``pen``, so a ``pen`` that ends above its start may be
either. On the synthetic pair of tests/core (no assets), at each ``w_pen`` given, α = 0 as the tests read it.

    .venv/bin/python tools/experiments/pen_split.py [--w-pen 1.0 0.5]
"""

from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--w-pen", type=float, nargs="+", default=[1.0, 0.5])
    args = ap.parse_args(argv)
    import torch

    from core.solver import SolveJob, SolverSettings
    from core.types import Motion
    from tools.experiments.solver_variants import synthetic_cases
    torch.set_num_threads(1)
    _, src, m, tgt = synthetic_cases(40)[0]                  # tests/core's pair, 40 frames
    ratio = tgt.skeleton.rest_global[0, 2, 3] / src.skeleton.rest_global[0, 2, 3]
    init = Motion(m.rotations.copy(), m.locations * ratio, m.fps)
    print("w_pen | L_pen weighted: start, end | self barrier: start, end   (α = 0, contact state off, 30 steps)")
    for w_pen in args.w_pen:
        job = SolveJob(src, m, tgt, init, SolverSettings(iterations=30, num_threads=1, contact_state=0.0, w_pen=w_pen))
        job.run()
        pairs = job.objective.pairs.build(None)

        def parts(residuals):
            with torch.no_grad():
                p, n, sole = job._forward(residuals, 0.0)
                raw = job.objective.raw_terms(p, n, 0.0, pairs, sole, job._root_world, None, job.body_positions)
                ends = [job.body_positions.unflatten(1, (-1, 2))]
                barrier = float(job.own_barrier.weighted(ends)) if job.own_barrier is not None else 0.0
                return float(job.objective.weighted(raw)["pen"]), barrier
        (p0, b0), (p1, b1) = parts(job.param.zero_residuals()), parts(None)
        print(f"{w_pen:g} | {p0:.4f}, {p1:.4f} | {b0:.4f}, {b1:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
