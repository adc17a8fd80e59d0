"""Operations dispatched per solver step, by the core function that issued them: where a step's kernel launches
come from on a GPU, and its per-operation overhead on a short clip on the CPU (docs/solver.md "GPU").

    .venv/bin/python tools/experiments/step_ops.py [--frames 75] [--steps 5] [--top 25]

The bench's scaling case (tools/bench.py SCALING) is set up as the product runs it, five steps are taken, then
``--steps`` more are counted with a ``TorchDispatchMode``: every aten operation (views included; on a GPU most of
the others are a kernel launch each), attributed to the innermost function under ``core/`` on the Python stack, or
to BACKWARD when autograd's engine runs it. Then the pose map alone (control points → key vertices, sole and body
points, and its backward) and the dense terms alone at the pose (``Objective.dense_terms`` and their backward):
what ``core/solver/graphed.py`` records as a CUDA graph, counted the same way.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import pathlib
import sys
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))


def counter():
    """A TorchDispatchMode counting operations by issuing core function (``.by_place``) and by name (``.by_op``)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.by_place, self.by_op = collections.Counter(), collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            place = "other"
            for fr in reversed(traceback.extract_stack(limit=40)):
                if "/core/" in fr.filename.replace("\\", "/"):
                    place = "core/" + fr.filename.replace("\\", "/").split("/core/", 1)[1] + ":" + fr.name
                    break
                if fr.name == "backward" and "torch" in fr.filename:
                    place = "BACKWARD"
                    break
            self.by_place[place] += 1
            self.by_op[str(func)] += 1
            return func(*args, **(kwargs or {}))
    return Count()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=75)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    import bench
    mods, src, mo, tgt = bench.scaling_case(args.frames)
    rt, solver = mods["core.retarget"], mods["core.solver"]
    settings = solver.SolverSettings.preset("balanced", num_threads=1)
    run = rt.Retarget(src, mo, tgt, rt.RetargetOptions(settings=settings, metrics=False, conflicts=False))
    for _ in run.steps():
        job = getattr(run, "job", None)
        if job is not None and job._step >= 5:
            break
    K = args.steps
    with counter() as c:
        for _ in range(K):
            job._adam_step()
    total = sum(c.by_place.values())
    case = f"{pathlib.Path(bench.SCALING[0]).stem} tiled to {args.frames} frames -> {pathlib.Path(bench.SCALING[1]).stem}"
    print(f"{case}: {total / K:.0f} operations a step (mean of {K})")
    for place, n in c.by_place.most_common(args.top):
        print(f"{n / K:8.1f}  {place}")
    print()
    for op, n in c.by_op.most_common(args.top):
        print(f"{n / K:8.1f}  {op}")
    with counter() as c:
        for _ in range(K):
            for p in job.param.params:
                p.grad = None
            outs = [t for t in job._forward()[:3] if t is not None] + [job.body_positions]
            torch.stack([t.sum() for t in outs if t is not None]).sum().backward()
    print(f"\nthe pose map and its backward: {sum(c.by_place.values()) / K:.0f} operations (of which BACKWARD "
          f"{c.by_place['BACKWARD'] / K:.0f}; a sum of its outputs included)")
    graphed = importlib.import_module(f"{bench.MODULE}.core.solver.graphed")
    if hasattr(graphed, "dense_at"):           # the dense terms alone, at the pose (what a GPU records with it)
        with torch.no_grad():
            off, p, _, pts = graphed.pose(job, *job.param.frame_residuals())
        off, p = off.requires_grad_(True), p.requires_grad_(True)
        pts = None if pts is None else pts.requires_grad_(True)
        with counter() as c:
            for _ in range(K):
                terms = graphed.dense_at(job, off, p, 0.5, pts)
                torch.stack(list(terms.values())).sum().backward()
        print(f"the dense terms ({', '.join(terms)}) and their backward: {sum(c.by_place.values()) / K:.0f} "
              f"operations (of which BACKWARD {c.by_place['BACKWARD'] / K:.0f}; a sum of them included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
