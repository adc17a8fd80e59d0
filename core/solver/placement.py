"""Where the characters of a joint solve start relative to one another (ReConForM §6.1, Fig. 7: a tall lead and a
short follow still join hands; docs/solver.md "Multi-character", "Placement").

``copy_rotations.place_together`` keeps the sources' relative places scaled by the partners' mean hip ratio, and
each member's start then follows its own source's planted feet (``SolveJob._root_xy_from_feet``). Neither looks at
where the partners touch: onto a 1.86 m lead and a 1.39 m follow, the lead's arm has to reach further for her hand
than his source's did, and the solve lifts his elbows off his sides to do it. Moving one root over many frames is
not a move Adam finds (every root control point would have to move together, and a move of a few of them makes
the feet slide), so the placement is done once, before the first step: one constant horizontal offset per
character (a shift of the whole clip changes no velocity, no height and no distance within a character), the
least-squares choice that lines up the source's contacts between the characters

    min Σ_e |(p_j(t) + o_c(j)) − (p_i(t) + o_c(i)) − d_e|²      over the contact entries e = (t, i, j)

where p is the member's start (copy-rotations moved by its feet offset) and d_e the source's vector from i to j
scaled as the partner terms scale it (``PartnerPairs``). The solution of least norm moves both partners of a couple
by half the correction each (a graph Laplacian's pseudo-inverse); a character who touches no one does not move.
"""

from __future__ import annotations

import numpy as np
import torch


def contact_offsets(members, pairs) -> np.ndarray:
    """(K, 2) horizontal offsets (metres, world x and y) that line up the source's contacts between the
    characters (the module docstring), from the members' current start and ``pairs``
    (``core.partners.PartnerPairs`` of the group). Zeros where no source contact joins two characters."""
    K = len(members)
    out = np.zeros((K, 2))
    ps, _ = pairs.active(None, 0.0)                    # every source entry between two characters
    touch = torch.nonzero(ps.src_dist < ps.src_dmin, as_tuple=True)[0]
    if K < 2 or not touch.numel():
        return out
    with torch.no_grad():
        start = torch.cat([m._forward(m.param.frame_residuals())[0] for m in members], 1)   # (T, Ntot, 3)
        t, i, j = ps.t[touch], ps.i[touch], ps.j[touch]
        d = ps.src_dir[touch]                                   # the source's p_j − p_i (E, 3), at its size
        want = d * (ps.src_dist[touch] / d.norm(dim=-1).clamp_min(1e-12))[:, None]   # scaled as the terms scale it
        need = (want - (start[t, j] - start[t, i]))[:, :2].double().cpu().numpy()   # o_c(j) − o_c(i), (E, 2)
    offsets = np.asarray(pairs.offsets)
    ci = np.searchsorted(offsets, i.cpu().numpy(), side="right") - 1
    cj = np.searchsorted(offsets, j.cpu().numpy(), side="right") - 1
    A = np.zeros((len(ci), K))
    np.add.at(A, (np.arange(len(ci)), cj), 1.0)
    np.add.at(A, (np.arange(len(ci)), ci), -1.0)
    # normal equations: L o = Aᵀ r with L = AᵀA the characters' contact Laplacian; its pseudo-inverse gives the
    # offsets of least norm (each connected group of characters keeps its mean place)
    return np.linalg.pinv(A.T @ A) @ (A.T @ need)


def place_members(members, pairs) -> np.ndarray:
    """Shift each member's root offset controls by ``contact_offsets`` (in place, before the first step; a
    constant added to every control point of a B-spline whose weights sum to 1 moves every frame by it). Returns
    the (K, 2) offsets in metres."""
    offsets = contact_offsets(members, pairs)
    with torch.no_grad():
        for m, o in zip(members, offsets):
            if np.any(o):
                m.param.root_off[:, :2] += torch.as_tensor(o / m.h_tgt, dtype=m.dtype, device=m.device)
    return offsets


__all__ = ["contact_offsets", "place_members"]
