"""Re-solve after a conflict slider (docs/solver.md "Live windows", issue 16): a warm-started re-solve with several
step shares and learning-rate shares (``core.solver.WarmSchedule``) against a solve from copy-rotations
with the same slider weights: the objective each ends at (over copy-rotations', the same weights) and its time.

    .venv/bin/python tools/experiments/resolve_variants.py [--slider 0.2] [--conflict 0]
        [--variants "[(0.3, 1.0), (0.15, 0.3), (0.15, 0.1), (0.1, 0.3), (0.05, 1.0, True)]"]

A variant is (steps, lr) or (steps, lr, True): the last continues the first solve's optimiser
(``RetargetOptions.warm_state``, at ``RetargetOptions.continue_schedule``).

The case of `make bench`'s artist line (tools/bench/bench_artist.py: the Bandai kick tiled to 300 frames onto
mh_teen_girl, 'balanced', 1 thread). The slider is the ``--conflict``-th conflict of the first solve (costliest
first), set to ``--slider`` (0 keeps only its first term on that body part, 0.5 changes nothing).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
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
    ap.add_argument("--slider", type=float, default=0.2)
    ap.add_argument("--conflict", type=int, default=0)
    ap.add_argument("--variants", default="[(0.3, 1.0), (0.15, 0.3), (0.15, 0.1), (0.1, 0.3)]")
    args = ap.parse_args(argv)
    import common
    import bench_artist
    mods, src, tgt, motion = bench_artist.issue_case(300, threads=1)
    rt, solver = mods["core.pipeline.retarget"], mods["core.solver"]
    conflicts = importlib.import_module(f"{common.MODULE}.core.solver.conflicts")
    settings = solver.SolverSettings.preset("balanced", num_threads=1)
    opts = rt.RetargetOptions(settings=settings, metrics=False, conflicts=True)
    first = rt.run(rt.Retarget(src, motion, tgt, opts))
    conflict = first.conflicts[args.conflict]
    weights = conflicts.resolution_weights(conflict, args.slider)
    print(f"load average {os.getloadavg()[0]:.1f}; slider {args.slider} on {conflict.body_part} "
          f"{conflict.term_a} / {conflict.term_b} (conflict {args.conflict} of {len(first.conflicts)})")

    def solve(job):
        t0, rel = time.perf_counter(), []
        for s in job.steps():
            if s.solver is not None:
                rel.append(s.solver.relative)
        return rel, time.perf_counter() - t0
    new = dataclasses.replace(settings, part_weights=weights)
    rel, seconds = solve(rt.Retarget(first.source, motion, first.target,
                                     dataclasses.replace(opts, settings=new, conflicts=False),
                                     source_track=first.source_track))
    print(f"from copy-rotations ({new.iterations} steps): objective {rel[-1]:.3f} in {seconds:.2f} s")
    for variant in ast.literal_eval(args.variants):
        fraction, lr, state = (tuple(variant) + (False,))[:3]
        schedule = solver.WarmSchedule(steps=fraction, lr=lr)
        o = dataclasses.replace(opts, settings=new, conflicts=False, init_motion=first.init_motion,
                                warm_schedule=schedule, continue_schedule=schedule,
                                warm_start=first.motion, warm_sixd=first.job.result_sixd(),
                                warm_state=first.job.optim if state else None)
        rel, seconds = solve(rt.Retarget(first.source, motion, first.target, o, source_track=first.source_track))
        how = f"continuing the first solve's Adam at {lr:.0%} rates" if state else f"at {lr:.0%} rates"
        print(f"re-solve, {fraction:.0%} of the steps {how} ({len(rel)} steps): objective "
              f"{rel[0]:.3f} -> {rel[-1]:.3f} in {seconds:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
