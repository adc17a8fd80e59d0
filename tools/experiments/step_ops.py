"""Operations dispatched per solver step, by the core function that issued them: where a step's kernel launches
come from on a GPU, and its per-operation overhead on a short clip on the CPU (docs/solver.md "GPU").

    .venv/bin/python tools/experiments/step_ops.py [--frames 75] [--steps 5] [--top 25]
    .venv/bin/python tools/experiments/step_ops.py --time --frames 38 75 150 300 1000 [--steps 30] [--floor]

The bench's scaling case (tools/bench/run.py SCALING) is set up as the product runs it, five steps are taken, then
``--steps`` more are counted with a ``TorchDispatchMode``: every aten operation (views included; on a GPU most of
the others are a kernel launch each), attributed to the innermost function under ``core/`` on the Python stack, or
to BACKWARD when autograd's engine runs it. Then the pose map alone (control points → key vertices, sole and body
points, and its backward) and the dense terms alone at the pose (``Objective.dense_terms`` and their backward):
what ``core/solver/graphed.py`` records as a CUDA graph, counted the same way.

``--time``: per clip length, the milliseconds of a step (the mean of ``--steps`` after five untimed ones) split
into the forward pass (the terms at the current variables), the backward pass and Adam's update, with the
operations a step dispatches; then a straight line through the step's time against the clip length (least
squares): the part of a step that grows with the frames, and the part that does not (the fixed cost of its
operations). 1 thread. ``--floor``: beside each step, the milliseconds of a chain of trivial operations that
dispatches as many (eager torch's cost per operation on this CPU, whatever the arithmetic).
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
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))


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


def started_job(common, frames: int):
    """The scaling case's SolveJob at ``frames`` frames, set up as the product runs it, after five steps."""
    mods, src, mo, tgt = common.scaling_case(frames)
    rt, solver = mods["core.pipeline.retarget"], mods["core.solver"]
    settings = solver.SolverSettings.preset("balanced", num_threads=1)
    run = rt.Retarget(src, mo, tgt, rt.RetargetOptions(settings=settings, metrics=False, conflicts=False))
    for _ in run.steps():
        job = getattr(run, "job", None)
        if job is not None and job._step >= 5:
            return job
    raise SystemExit("the solve ended before its fifth step")


def floor_ms(ops: int, repeats: int = 30) -> float:
    """Milliseconds of a chain of trivial operations (a (75, 3) tensor times a scalar, link after link, summed, then
    its backward) that dispatches ``ops`` operations, counted as a step's are (``counter``): what that many
    operations cost in eager torch on this CPU whatever their arithmetic (the median of ``repeats`` runs after
    three)."""
    import statistics
    import time

    import torch
    x = torch.randn(75, 3, requires_grad=True)

    def chain(n):
        y = x
        for _ in range(n):
            y = y * 1.0001
        y.sum().backward()
    with counter() as c:
        chain(100)
    per_link = sum(c.by_place.values()) / 100.0      # a product and its backward (the sum's few ops: noise)
    n = max(1, int(round(ops / per_link)))
    out = []
    for k in range(repeats + 3):
        t = time.perf_counter()
        chain(n)
        if k >= 3:
            out.append(time.perf_counter() - t)
    return 1e3 * statistics.median(out)


def timing(common, lengths, steps: int, floor: bool = False) -> int:
    """Print a step's forward / backward / Adam milliseconds per clip length, then the line through them; with
    ``floor``, beside each the milliseconds of as many trivial operations (``floor_ms``)."""
    import time

    import numpy as np
    import torch
    rows = []
    for frames in lengths:
        job = started_job(common, frames)
        with counter() as c:
            job._adam_step()
        ops = sum(c.by_place.values())
        fwd = bwd = upd = 0.0
        for _ in range(steps):       # the parts of SolveJob._adam_step, timed apart
            t0 = time.perf_counter()
            for p in job.param.params:
                p.grad = None
            terms = job.weighted_terms()
            loss = sum(terms.values())
            t1 = time.perf_counter()
            (loss * job.param.num_controls).backward()
            t2 = time.perf_counter()
            job.optim.step()
            t3 = time.perf_counter()
            fwd, bwd, upd = fwd + t1 - t0, bwd + t2 - t1, upd + t3 - t2
        fwd, bwd, upd = (1e3 * x / steps for x in (fwd, bwd, upd))
        rows.append((frames, fwd + bwd + upd))
        line = (f"{frames} frames: step {fwd + bwd + upd:.2f} ms = forward {fwd:.2f} + backward {bwd:.2f} + Adam "
                f"{upd:.2f} ms; {ops} operations")
        if floor:
            f = floor_ms(ops)
            line += (f"; as many trivial operations (a (75, 3) product chain and its backward) {f:.2f} ms, "
                     f"{f / (fwd + bwd + upd):.0%} of the step")
        print(line, flush=True)
    if len(rows) >= 2:
        x, y = np.asarray(rows, dtype=np.float64).T
        slope, fixed = np.polyfit(x, y, 1)
        print(f"least-squares line: step ≈ {fixed:.2f} ms + {1e3 * slope:.1f} µs × frames; at {int(x[0])} frames "
              f"{fixed / (fixed + slope * x[0]):.0%} of the step is the fixed part (torch {torch.__version__})")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, nargs="+", default=[75])
    ap.add_argument("--time", action="store_true", help="time a step's parts at each --frames length")
    ap.add_argument("--floor", action="store_true", help="with --time: beside each step, the milliseconds of as "
                    "many trivial operations (eager torch's cost per operation on this CPU)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    import common
    if args.time:
        return timing(common, args.frames, args.steps, args.floor)
    frames = args.frames[0]
    job = started_job(common, frames)
    K = args.steps
    with counter() as c:
        for _ in range(K):
            job._adam_step()
    total = sum(c.by_place.values())
    case = f"{pathlib.Path(common.SCALING[0]).stem} tiled to {frames} frames -> {pathlib.Path(common.SCALING[1]).stem}"
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
    graphed = importlib.import_module(f"{common.MODULE}.core.solver.graphed")
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
