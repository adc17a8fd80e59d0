"""Solver ablations on the synthetic humanoid pair of tests/core/synth.py (no Blender, ~1 min).

    .venv/bin/python tools/solver_ablation.py "[{}, {'knot_spacing': 0}, {'smooth_mode': 'absolute'}]"

Prints, per SolverSettings override: solve seconds and the metrics of docs/metrics.md that matter for the
choice (joint jerk, floor and self penetration, grounded F1, key-vertex contact F1) next to copy-rotations.
"""

import ast
import pathlib
import sys
import time
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
warnings.filterwarnings("ignore")

from core.metrics import evaluate  # noqa: E402
from core.solver import SolveJob, SolverSettings  # noqa: E402
from core.types import Motion  # noqa: E402
from tests.core.synth import make_humanoid, walk_motion  # noqa: E402

KEYS = ("jerk_mean", "floor_pen_mean", "self_pen_mean", "grounded_f1", "contact_f1")


def main(argv):
    variants = ast.literal_eval(argv[0]) if argv else [{}]
    src = make_humanoid()
    tgt = make_humanoid(scale=0.8, girth=1.6, leg=0.8, name="tgt")
    m = walk_motion(src, frames=150, clap=True)
    ratio = tgt.skeleton.rest_global[0, 2, 3] / src.skeleton.rest_global[0, 2, 3]
    init = Motion(m.rotations.copy(), m.locations * ratio, m.fps)
    e = evaluate(src, m, tgt, init)
    print("variant | seconds | " + " | ".join(KEYS))
    print("copy-rotations | - | " + " | ".join(f"{e[k]:.4g}" for k in KEYS) + f" (source jerk {e['source_jerk_mean']:.4g})")
    for kw in variants:
        job = SolveJob(src, m, tgt, init, SolverSettings(num_threads=2, **kw))
        t = time.perf_counter()
        res = job.run()
        dt = time.perf_counter() - t
        e = evaluate(src, m, tgt, res)
        print(f"{kw or 'defaults'} | {dt:.2f} | " + " | ".join(f"{e[k]:.4g}" for k in KEYS))


if __name__ == "__main__":
    main(sys.argv[1:])
