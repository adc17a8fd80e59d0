"""The bodies' capsule proxies of the barriers (``barrier.py``): a target's capsule cores
(``metrics_partners.body_capsules``) as points carried by its bones, with its bulge points (``bulges.py``), and the
source's capsules of the same segments over the clip."""

from __future__ import annotations

import numpy as np
import torch

from ..metrics.partners import body_capsules, capsule_paths
from . import objective
from .bulges import bulge_points


def capsule_points(character, bulges: bool = False):
    """(capsules, (bones (2R,), (2R, 3) positions in each bone's frame)): a character's capsule cores and their
    axis ends as points carried by their bones (``SolveJob.body_points``), R = B rows of two ends; with
    ``bulges``, followed by its ``bulges.bulge_points`` as P more rows whose two ends are the same point."""
    caps = body_capsules(character)
    bones, ends = np.repeat(caps.bone, 2), caps.ends.reshape(-1, 3)
    if bulges:
        _, b_bone, b_local = bulge_points(character, caps)
        bones, ends = np.concatenate([bones, np.repeat(b_bone, 2)]), np.concatenate([ends, np.repeat(b_local, 2, 0)])
    return caps, (bones, ends)


def own_capsules(job):
    """The target's capsules for ``job``'s self-contact barrier, or None when ``w_self_barrier`` is 0 or the target
    has no mesh. Sets ``job.body_points`` to their ends and bulge points (when a joint solve has not set the same
    already) for the barrier and for L_smooth's joints (``objective.SMOOTH_JOINTS``), also when only the latter reads them."""
    s = job.settings
    if (s.w_self_barrier <= 0 and objective.SMOOTH_JOINTS <= 0) or job.target.mesh is None or job.source.mesh is None:
        return None
    caps, points = capsule_points(job.target, bulges=True)
    if job.body_points is None:
        job.body_points = points
    return caps if s.w_self_barrier > 0 else None


def source_capsules(job, names) -> tuple:
    """The source's capsules of the segments ``names`` (a target's, in that order) over ``job``'s clip: their axis
    ends (T, B, 2, 3) float64, radii (B,) float64, and (B,) bool, the segments the source's body lacks (their rows
    hold its first capsule's: to be ignored)."""
    sc = body_capsules(job.source)
    where = [sc.names.index(n) if n in sc.names else -1 for n in names]
    idx = [max(w, 0) for w in where]
    return (capsule_paths(job.source_track, sc)[:, idx], torch.as_tensor(sc.radius, dtype=torch.float64)[idx],
            torch.as_tensor([w < 0 for w in where]))


def source_body_points(job):
    """The source's counterpart of ``job.body_points`` over the clip, for the jerk budget's cap
    (``objective.JERK_BUDGET_SOURCE``): ((T, P, 3) world positions, (P,) bool) — each capsule end of a segment the
    source's body has too (the same segment's end), zeros and False for the other rows (the bulge points, a segment the
    source lacks); None without the budget's cap, body points or a source mesh."""
    s = job.settings
    if not (s.jerk_budget and objective.JERK_BUDGET_SOURCE) or job.body_points is None or job.source.mesh is None:
        return None
    names = body_capsules(job.target).names
    ends, _, missing = source_capsules(job, names)
    T, rows = job.num_frames, 2 * len(names)                  # the body points' first rows: the capsules' two ends
    has = torch.zeros(len(job.body_points[0]), dtype=torch.bool, device=job.device)
    has[:rows] = ~missing.repeat_interleave(2).to(job.device)
    out = torch.zeros((T, len(has), 3), dtype=job.dtype, device=job.device)
    out[:, :rows] = ends.reshape(T, rows, 3).to(dtype=job.dtype, device=job.device) * has[:rows, None]
    return out, has


def capsule_ends(job) -> torch.Tensor:
    """(T, B, 2, 3) ``job.body_positions``' capsule ends and bulge points, in pairs: its first rows, before the
    surface barrier's points (``surface.surface_barrier`` appends them), which are no capsule's."""
    p = job.body_positions
    if job.surface is not None:
        p = p[:, :job.surface.rows.start]
    return p.unflatten(1, (-1, 2))


__all__ = ["capsule_ends", "capsule_points", "own_capsules", "source_body_points", "source_capsules"]
