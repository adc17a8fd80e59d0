"""The solver's pose map as one CUDA graph (issue 16 item 4; docs/solver.md "GPU").

On a GPU a step is bound by kernel launches, not arithmetic: a third of them are the pose map, from the control
points to the key vertices (the B-spline, the 6D rotations, forward kinematics level by level, skinning) and back
through it. Its shapes never change during a solve, so it is recorded once, forward and backward, with
``torch.cuda.make_graphed_callables`` and replayed at every step: the same kernels in the same order (the same
result, bit for bit), launched by one call. The rest of a step (the active pairs, the barriers' searches) changes
shape from step to step and stays eager.
"""

from __future__ import annotations

import torch

#: below this many steps recording (three warm-up passes and the capture) costs more than replaying saves
MIN_STEPS = 20


def pose(job, d: torch.Tensor, off: torch.Tensor):
    """The pose at per-frame residuals ``d`` (T, Jo, 6) and hips offsets ``off`` (T, 3, units of h_tgt): (off,
    key-vertex and sole positions (T, N + S, 3), their normals, the body points (T, P, 3) or None)."""
    p, n = job.vars(job.param.local_rotations(d), job.param.root_location(off))
    return off, p, n, job.vars.last_points


class GraphedPose:
    """``pose`` from the control points (delta (C, Jo, 6), root_off (C, 3)), recorded as a CUDA graph.

    Calling it returns (off, p, n, points) as ``pose`` does, differentiable w.r.t. both control tensors. The
    graph's outputs are static buffers that the next replay overwrites; what is returned are copies, so a tensor
    a caller keeps (a refresh's positions) stays what it was."""

    def __init__(self, job):
        self.has_points = job.vars.last_points is not None

        def controls_pose(delta, root_off):
            off, p, n, pts = pose(job, *job.param.residuals(delta, root_off))
            return (off, p, n) + ((pts,) if self.has_points else ())
        sample = tuple(t.detach().clone().requires_grad_(True) for t in job.param.params)
        # recording warms up on a side stream, and torch then warns once per process that an AccumulateGrad node's
        # stream differs from its producer's; the replays give the eager pose's results bit for bit (bench_gpu), so
        # the warning is silenced while recording only
        quiet = getattr(torch.autograd.graph, "set_warn_on_accumulate_grad_stream_mismatch", None)
        if quiet is not None:
            quiet(False)
        try:
            self._graphed = torch.cuda.make_graphed_callables(controls_pose, sample)
        finally:
            if quiet is not None:
                quiet(True)

    def __call__(self, delta: torch.Tensor, root_off: torch.Tensor):
        out = [t.clone() for t in self._graphed(delta, root_off)]
        return tuple(out) if self.has_points else (*out, None)


def graphed_pose(job):
    """A GraphedPose for ``job``'s variables when its device is a GPU, ``settings.cuda_graph`` is on and the solve
    takes at least MIN_STEPS steps; else None (the pose is then evaluated eagerly). A graph that cannot be
    recorded (an operation a capture does not allow) leaves the solve eager and says why in ``job.stats``."""
    s = job.settings
    if job.device.type != "cuda" or not s.cuda_graph or job.total < MIN_STEPS:
        job.stats["cuda_graph"] = False
        return None
    try:
        graphed = GraphedPose(job)
    except RuntimeError as e:
        job.stats.update(cuda_graph=False, cuda_graph_error=str(e).splitlines()[0][:200])
        return None
    job.stats["cuda_graph"] = True
    return graphed
