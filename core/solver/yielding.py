"""The contact state yields to the self barrier, frame by frame (docs/solver.md "The contact state yields to the
self barrier").

The contact state (``losses.contact_state_loss``, × ``contact_state`` = 1000) holds a source contact's key vertices
within d_min; the self barrier (``surface.own_penetration``, × ``w_self_barrier`` = 5) keeps a limb out of its own
body. Where the source's contact cannot be met on the target's body without one part entering another (the hands
on a big belly's front pull the forearm into its side; long arms pressed to the chest), the two fight on the same
joints and the pull, two hundred times heavier, holds the limb centimetres inside.

Over the last quarter of a solve's steps (``YIELD_FROM``, where the solve settles), a step's gradient is taken with
respect to each frame's variables (the 6D residuals (T, Jo, 6) and the hips offset (T, 3)), and on each frame where
the contact state's gradient a_t points against the barrier's b_t (⟨a_t, b_t⟩ < 0), the step loses a's component
along b:

    g_t ← g_t − ⟨a_t, b_t⟩ / |b_t|² · b_t

(gradient surgery, as PCGrad, Yu et al. 2020, does between tasks). The contact still pulls its key vertices
together along the surface they press, not into the body; the barrier and every other term act as before, and a
frame where the two do not conflict is untouched. The gradient is then carried to the control points through the
B-spline, as ``loss.backward()`` would.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import torch

from .surface import own_penetration_frames

#: on each frame where the contact state's gradient points against the self barrier's, the step loses the contact
#: state's component along the barrier's: the contact pulls along the surface, not into the body (docs/decisions.md
#: "The contact state yields to the self barrier")
CONTACT_YIELDS_TO_BARRIER = True
#: ... from this share of the steps on, where the solve settles (earlier, the pull finds the contact; a yielding step
#: costs two more backward passes through the pose map)
YIELD_FROM = 0.75
#: yield per (frame, joint) block instead of per frame: each joint's 6D residual, and the hips offset, on its own (a
#: pull against the barrier on an arm is taken out even where the frame's other joints outweigh it: docs/decisions.md
#: "The contact state yields joint by joint")
YIELD_PER_JOINT = True
#: a frame's barrier gradient below this squared norm has no direction to yield along
_TINY = 1e-30


class YieldingPart(NamedTuple):
    """One character's share of a yielding step.

    residuals: its per-frame variables (6D (T, Jo, 6), hips offset (T, 3)) with their graph to its control points;
    leaves: detached copies of them, requiring grad, at which its terms were evaluated (``leaves_of``);
    pull: its weighted contact state (0-dim) or None; barrier: its weighted self barrier (0-dim) or None;
    outputs: the per-frame tensors (T, ...) between the leaves and the pull (the pose's positions and normals),
    through which a frame's gradient of the pull can be told to be zero without the whole pose map's backward;
    barrier_frames: (T,) bool, the frames on which the barrier has a gradient (its own bookkeeping).
    """

    residuals: tuple
    leaves: tuple
    pull: Optional[torch.Tensor]
    barrier: Optional[torch.Tensor]
    outputs: tuple = ()
    barrier_frames: Optional[torch.Tensor] = None


def leaves_of(residuals) -> tuple:
    """Detached copies of ``residuals`` (tensors (T, ...)) that require grad: the step's terms are evaluated at
    them, so that their gradients are per frame."""
    return tuple(r.detach().requires_grad_(True) for r in residuals)


def _differentiable(x) -> bool:
    return x is not None and x.requires_grad


def _grads(x: torch.Tensor, leaves: tuple) -> tuple:
    """d x / d leaves, zeros where x does not depend on a leaf; the graph is kept."""
    g = torch.autograd.grad(x, leaves, retain_graph=True, allow_unused=True)
    return tuple(torch.zeros_like(leaf) if v is None else v for v, leaf in zip(g, leaves))


def _frames_moved(x: torch.Tensor, outputs: tuple) -> torch.Tensor:
    """(T,) bool: the frames on which ``x`` has a gradient w.r.t. ``outputs`` (tensors (T, ...)), i.e. the only
    frames on which it can have one w.r.t. the leaves (each frame's outputs depend on that frame's leaves alone). A
    backward through the terms only, not the pose map."""
    g = torch.autograd.grad(x, outputs, retain_graph=True, allow_unused=True)
    T = outputs[0].shape[0]
    moved = torch.zeros(T, dtype=torch.bool, device=outputs[0].device)
    for v in g:
        if v is not None:
            moved |= (v.reshape(T, -1) != 0).any(1)
    return moved


def _conflict_possible(part: YieldingPart) -> bool:
    """Whether ``part``'s pull and barrier may point against each other on some frame: both differentiable and,
    when ``outputs`` and ``barrier_frames`` are given, both with a gradient on a common frame."""
    if not (_differentiable(part.pull) and _differentiable(part.barrier)):
        return False
    if not part.outputs or part.barrier_frames is None:
        return True
    barred = part.barrier_frames
    return bool(barred.any()) and bool((_frames_moved(part.pull, part.outputs) & barred).any())


def _coefficient(dot: torch.Tensor, bb: torch.Tensor) -> torch.Tensor:
    """⟨a, b⟩ / |b|² where the pull points against the barrier (``dot`` = ⟨a, b⟩ < 0, ``bb`` = |b|² not ~0), else 0;
    any shape, element-wise."""
    return torch.where((dot < 0) & (bb > _TINY), dot / bb.clamp_min(_TINY), torch.zeros_like(dot))


def without_conflict(g: tuple, pull: tuple, barrier: tuple, count: bool = False):
    """``g`` less, on each frame t where ``pull``'s gradient points against ``barrier``'s (⟨a_t, b_t⟩ < 0 over
    every variable of the frame), ⟨a_t, b_t⟩ / |b_t|² · b_t. All three: tuples of tensors (T, ...) of the same
    shapes. With ``count``, (that, the number of such frames as a 0-dim tensor)."""
    if YIELD_PER_JOINT:
        return _without_conflict_per_block(g, pull, barrier, count)
    T = g[0].shape[0]
    a = torch.cat([x.reshape(T, -1) for x in pull], 1)
    b = torch.cat([x.reshape(T, -1) for x in barrier], 1)
    coef = _coefficient((a * b).sum(1), (b * b).sum(1))                                     # (T,)
    out = tuple(gi - coef.view(-1, *([1] * (gi.dim() - 1))) * bi for gi, bi in zip(g, barrier))
    return (out, (coef != 0).sum()) if count else out


def _without_conflict_per_block(g: tuple, pull: tuple, barrier: tuple, count: bool):
    """``without_conflict`` on each (frame, joint) block of tensors (T, Jo, 6) and each frame of tensors (T, 3)."""
    out, frames = [], None
    for gi, a, b in zip(g, pull, barrier):
        coef = _coefficient((a * b).sum(-1), (b * b).sum(-1))                         # (T, Jo) or (T,)
        out.append(gi - coef[..., None] * b)
        hit = coef != 0 if coef.dim() == 1 else (coef != 0).any(-1)
        frames = hit if frames is None else frames | hit
    return (tuple(out), frames.sum()) if count else tuple(out)


def yielding_backward(loss: torch.Tensor, parts: list, scale: float) -> list:
    """Accumulate d(``loss`` × ``scale``)/d(control points) into their ``.grad``, as ``loss.backward()`` would,
    with each part's contact state yielding to its self barrier frame by frame (``without_conflict``). ``loss``
    was evaluated at every part's ``leaves``. Returns, per part, the number of frames that yielded (None where
    no frame could: ``_conflict_possible``)."""
    leaves = [leaf for part in parts for leaf in part.leaves]
    g = list(torch.autograd.grad(loss, leaves, retain_graph=True))
    k, counts = 0, []
    for part in parts:
        n = len(part.leaves)
        count = None
        if _conflict_possible(part):
            g[k:k + n], count = without_conflict(tuple(g[k:k + n]), _grads(part.pull, part.leaves),
                                                 _grads(part.barrier, part.leaves), count=True)
        counts.append(count)
        k += n
    torch.autograd.backward([r for part in parts for r in part.residuals], [x * scale for x in g])
    return counts


def yields(job) -> bool:
    """Whether ``job``'s (a SolveJob's) contact state yields to its self barrier: CONTACT_YIELDS_TO_BARRIER, a
    contact state and a self barrier."""
    return bool(CONTACT_YIELDS_TO_BARRIER and job.settings.contact_state > 0
                and (job.own_barrier is not None or job.surface is not None))


def yields_at(job, step: int) -> bool:
    """Whether ``job``'s step ``step`` (of ``job.total``) yields: ``yields`` and the step in the last 1 −
    YIELD_FROM of the solve."""
    return yields(job) and step >= YIELD_FROM * job.total


def job_part(job, residuals: tuple, leaves: tuple) -> YieldingPart:
    """``job``'s share of a yielding step whose terms were just evaluated at ``leaves`` (``leaves_of`` its
    per-frame variables ``residuals``): its weighted contact state and self barrier, the pose's key vertices and
    normals, the barriers' frames (``surface.own_penetration_frames``)."""
    pull = job.objective.last_contact_state if yields(job) else None
    barrier = job.last_own_penetration
    frames = None if barrier is None else own_penetration_frames(job)
    return YieldingPart(residuals, leaves, pull, barrier, job.pose_outputs, frames)


def yielding_step(job) -> tuple:
    """``job``'s terms and loss at its current variables, their gradient accumulated into its control points with
    the contact state yielding (``yielding_backward``); the count of frames that yielded kept on ``job.yielded``."""
    res = job.param.frame_residuals()
    leaves = leaves_of(res)
    terms = job.weighted_terms(residuals=leaves)
    loss = sum(terms.values())
    job.yielded.append(yielding_backward(loss, [job_part(job, res, leaves)], job.param.num_controls)[0])
    return terms, loss


def yield_stats(counts: list) -> dict:
    """``yield_steps``, the yielding steps on which a frame had both gradients, and ``yield_frames``, the frames
    that yielded over them, from a solve's per-step counts (0-dim tensors, None where no frame could: read back
    once, at its end)."""
    kept = [c for c in counts if c is not None]
    frames = torch.stack(kept).tolist() if kept else []
    return {"yield_steps": len(frames), "yield_frames": int(sum(frames))}


__all__ = ["CONTACT_YIELDS_TO_BARRIER", "YIELD_FROM", "YieldingPart", "job_part", "leaves_of", "without_conflict",
           "yield_stats", "yielding_backward", "yielding_step", "yields", "yields_at"]
