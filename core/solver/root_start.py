"""Where the solve's root starts horizontally (ReConForM leaves the start to us: docs/solver.md "The root's
start"): a target with another stride than copy-rotations' slides; the root is moved so the source's planted feet
stay put before the first Adam step."""

from __future__ import annotations

import torch

from ..descriptors.pose import sliding


def root_xy_from_feet(objective, p0: torch.Tensor, fps: float) -> torch.Tensor:
    """(T, 2) horizontal root offset (metres) that keeps the source's planted feet planted, from the
    copy-rotations key vertices ``p0`` (T, N, 3), with ``objective``'s source velocities and floor weights.

    Per frame step t -> t+1, the horizontal root velocity is corrected by the W_floor-weighted mean of
    (source velocity − copy-rotations velocity) of the key vertices (the velocity L_sliding compares);
    integrated over time this is an offset o(t) (held where no key vertex is near the floor), later fitted
    to the B-spline controls as a weighted average (quasi-interpolation, ``Parametrisation.set_root_xy``).
    Copy-rotations' walk speed follows the hip-height ratio, so a target with another stride slides; this
    removes most of it before the first step instead of asking Adam to move every root control by tens of
    centimetres.
    """
    ob = objective
    with torch.no_grad():
        vt = sliding(p0, fps)                                                # (T-1, N, 2)
        w = ob.wf_src[:-1]                                                # (T-1, N)
        wsum = w.sum(-1, keepdim=True)
        dv = (w[..., None] * (ob.src_vel_cmp - vt)).sum(1) / wsum.clamp_min(1e-6)
        dv = torch.where(wsum > 1e-3, dv, torch.zeros_like(dv))
        return torch.cat([torch.zeros_like(dv[:1]), torch.cumsum(dv, 0) / fps], 0)   # (T, 2) metres
