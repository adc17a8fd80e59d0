"""The solver's pose map and its dense terms as one CUDA graph (issue 16 item 4; docs/solver.md "GPU").

On a GPU a step is bound by kernel launches, not arithmetic. A third of them are the pose map, from the control
points to the key vertices (the B-spline, the 6D rotations, forward kinematics level by level, skinning) and back
through it; many more are the terms over every frame's key vertices and sole points (``Objective.dense_terms``:
reg, smooth, height, floor, the feet's contact and lock, sliding). The shapes of both never change during a solve,
so they are recorded once, forward and backward, with ``torch.cuda.make_graphed_callables`` and replayed at every
step, launched by one call; α (the ramp of the target's adaptive weights) is the graph's input. The rest of a
step (the active pairs, the barriers' searches and the terms on them) changes shape from step to step and stays
eager.

On the CPU the same function can be compiled by ``torch.compile`` (``SolverSettings.compile``, off by default):
inductor fuses its few hundred small operations, forward and backward, into a few C++ kernels (docs/solver.md
"Compiled pose map (`compile`, an option)"). It needs a C++ compiler and costs the compilation on the first solve
of each clip length in a process (torch caches it on disk); where compiling fails the solve goes on eagerly and
``job.stats`` says why.
"""

from __future__ import annotations

import functools

import torch

#: on a GPU, the pose map recorded as a CUDA graph and replayed at every step: the same kernels without their launch
#: cost (False: eager, as tools/bench/bench_gpu.py compares; docs/solver.md "GPU")
CUDA_GRAPH = True
#: below this many steps recording (three warm-up passes and the capture) costs more than replaying saves
MIN_STEPS = 20
#: the dense terms recorded with the pose map (False: the pose map alone, as before 2026-11-27)
GRAPH_TERMS = True


def pose(job, d: torch.Tensor, off: torch.Tensor):
    """The pose at per-frame residuals ``d`` (T, Jo, 6) and hips offsets ``off`` (T, 3, units of h_tgt): (off,
    key-vertex and sole positions (T, N + S, 3), their normals, the body points (T, P, 3) or None)."""
    p, n = job.vars(job.param.local_rotations(d), job.param.root_location(off))
    return off, p, n, job.vars.last_points


def dense_at(job, off: torch.Tensor, p: torch.Tensor, alpha, points: torch.Tensor = None) -> dict:
    """``job.objective.dense_terms`` at ``pose``'s hips offsets ``off``, stacked key-vertex and sole positions
    ``p`` and body points ``points``, as ``SolveJob.terms_at`` evaluates them (the hips moved by ``off`` × h_tgt)."""
    N = job.num_keyverts
    sole = p[:, N:] if p.shape[1] > N else None
    return job.objective.dense_terms(p[:, :N], alpha, sole, off * job.h_tgt, points)


def pose_and_terms(job, residuals=None, alpha=None) -> tuple:
    """(off, p, n, points, dense) as ``controls_pose``'s at ``job``'s current variables, from the job's CUDA graph or
    compiled function (``job._pose``) when it has one, or eagerly in the graph's order of operations (the same
    result) at per-frame ``residuals`` (6D (T, Jo, 6), hips offsets (T, 3)) when given, which neither takes (the
    steps of a contact state yielding to its self barrier, ``yielding.py``); ``dense`` None without α."""
    if job._pose is not None and residuals is None:     # one CUDA graph, replayed; or the compiled function
        return job._pose(*job.param.params, alpha=alpha)
    off, p, n, pts = pose(job, *(job.param.frame_residuals() if residuals is None else residuals))
    return off, p, n, pts, None if alpha is None else dense_at(job, off, p, alpha, pts)


def controls_pose(job, *args) -> tuple:
    """``pose`` from the control points (``args``: ``job.param.params``' tensors, delta (C, Jo, 6), root_off (C, 3),
    ..., then α) and ``dense_at`` there: (off, p, n, points, {term: value}), the function a GPU records and the CPU
    may compile."""
    *params, alpha = args
    off, p, n, pts = pose(job, *job.param.residuals(*params))
    return off, p, n, pts, dense_at(job, off, p, alpha, pts)


class GraphedPose:
    """``pose`` from the control points (``job.param.params``), and with ``terms`` the dense terms at it, recorded
    as a CUDA graph.

    Calling it returns (off, p, n, points, dense) with ``pose``'s four and {term: value} of the dense terms at α
    (None without ``terms`` or α), differentiable w.r.t. every control tensor. The graph's outputs are static
    buffers that the next replay overwrites; what is returned are copies, so a tensor a caller keeps (a refresh's
    positions) stays what it was."""

    def __init__(self, job, terms: bool = True):
        self.has_points = job.vars.last_points is not None
        self.keys = ()                #: the dense terms' names, in the order of the graph's last outputs
        self._alpha = job.param.params[0].new_zeros(())

        def recorded(*args):          # the control tensors, then α
            if terms:                 # which terms a job has (a foot model's, the soles' jerk) is set at its set-up
                off, p, n, pts, dense = controls_pose(job, *args)
                self.keys = tuple(dense)
            else:
                (off, p, n, pts), dense = pose(job, *job.param.residuals(*args[:-1])), {}
            return (off, p, n) + ((pts,) if self.has_points else ()) + tuple(dense.values())
        sample = tuple(t.detach().clone().requires_grad_(True) for t in job.param.params) + (self._alpha.clone(),)
        # recording warms up on a side stream, and torch then warns once per process that an AccumulateGrad node's
        # stream differs from its producer's; the replays give the eager pose's results bit for bit (bench_gpu), so
        # the warning is silenced while recording only
        quiet = getattr(torch.autograd.graph, "set_warn_on_accumulate_grad_stream_mismatch", None)
        if quiet is not None:
            quiet(False)
        try:
            self._graphed = torch.cuda.make_graphed_callables(recorded, sample)
        finally:
            if quiet is not None:
                quiet(True)

    def __call__(self, *params, alpha=None):
        if alpha is not None:
            self._alpha.fill_(float(alpha))
        out = [t.clone() for t in self._graphed(*params, self._alpha)]
        k = 4 if self.has_points else 3
        head = tuple(out[:k]) if self.has_points else (*out[:k], None)
        dense = dict(zip(self.keys, out[k:])) if self.keys and alpha is not None else None
        return head + (dense,)


class CompiledPose:
    """``GraphedPose``'s interface on the CPU: the pose and the dense terms as one function of (the control tensors,
    α as a 0-dim tensor) compiled by ``torch.compile`` (shapes fixed: a clip of another length compiles again).
    If compiling or running the compiled code raises, that call and every later one evaluate the same function
    eagerly (the same terms, in the same order) and ``job.stats["compile_error"]`` says why. Its compiled backward
    frees what it saved (donated buffers), so it goes back through it once: a step at per-frame variables of its own
    (``yielding.py``'s, three passes with ``retain_graph``) evaluates the pose eagerly, as on a GPU."""

    def __init__(self, job):
        self.job = job
        self._eager = functools.partial(controls_pose, job)
        self._compiled = torch.compile(self._eager, dynamic=False)
        self._failed = False

    def __call__(self, *params, alpha=None):
        a = torch.tensor(0.0 if alpha is None else float(alpha), dtype=params[0].dtype)
        out = None
        if not self._failed:
            try:
                out = self._compiled(*params, a)
            except Exception as e:          # no C++ compiler, an operation inductor cannot lower, ...
                self._failed = True
                self.job.stats["compiled"] = False
                self.job.stats["compile_error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200]}"
        if out is None:
            out = self._eager(*params, a)
        off, p, n, pts, dense = out
        return off, p, n, pts, (dense if alpha is not None else None)


def compiled_pose(job):
    """A CompiledPose for ``job`` when ``settings.compile`` is on, its device is the CPU and the solve takes at
    least MIN_STEPS steps; else None."""
    if not job.settings.compile or job.device.type != "cpu" or job.total < MIN_STEPS:
        job.stats["compiled"] = False
        return None
    job.stats["compiled"] = True
    return CompiledPose(job)


def graphed_pose(job):
    """A GraphedPose for ``job``'s variables (with its dense terms, ``GRAPH_TERMS``) when its device is a GPU,
    CUDA_GRAPH is on and the solve takes at least MIN_STEPS steps; on the CPU a CompiledPose when
    ``settings.compile`` is on; else None (the pose is then evaluated eagerly). A graph that cannot be recorded
    (an operation a capture does not allow) is tried again without the terms, then the solve stays eager;
    ``job.stats`` says why."""
    if job.device.type != "cuda":
        job.stats["cuda_graph"] = False
        return compiled_pose(job)
    if not CUDA_GRAPH or job.total < MIN_STEPS:
        job.stats["cuda_graph"] = False
        return None
    for terms in ((True, False) if GRAPH_TERMS else (False,)):
        try:
            graphed = GraphedPose(job, terms)
        except RuntimeError as e:
            job.stats["cuda_graph_error"] = str(e).splitlines()[0][:200]
            continue
        job.stats["cuda_graph"] = True
        job.stats["cuda_graph_terms"] = bool(graphed.keys)
        return graphed
    job.stats["cuda_graph"] = False
    return None
