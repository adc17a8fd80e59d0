"""The pair terms of ReConForM §4.2 on a sparse set of (frame, i, j) entries: L_dist, L_dir and L_pen, and the
contact state (docs/solver.md "Pair terms"). ``Objective`` (one character's pairs) and ``partners.PartnerObjective``
(the pairs between two characters) call ``pair_terms`` with their own flags; the functions themselves hold nothing.
"""

from __future__ import annotations

import torch

from ..descriptors.pose import pair_descriptors
from ..descriptors.weights import interaction_weight
from ..rig.vec3 import dot3
from .losses import contact_state_loss, dir_loss, dist_loss, pen_loss


def focused(w: torch.Tensor, w_src: torch.Tensor, focus: float) -> torch.Tensor:
    """(E,) L_dist's entry weight: the mixed weight ``w`` × (1 + focus · W_src), the source's contacts matched more
    closely than its far pairs (docs/solver.md "Pair terms")."""
    return w * (1.0 + focus * w_src) if focus else w


def focused_square(w_src: torch.Tensor, focus: float) -> torch.Tensor:
    """(E,) the square of L_dist's weight at α = 0 (``focused`` with w = W_src): its reference scale's floor is
    Σ of it × a small residual², as the term itself weighs its entries (``pair_terms``)."""
    return focused(w_src, w_src, focus).square()


def pair_terms(p, n, alpha: float, pairset, scale: dict, focus: float = 0.0, surface_pen: bool = False,
               state_margin: float = None, held: torch.Tensor = None, apart: bool = False, seen: tuple = None) -> dict:
    """L_dist, L_dir, L_pen summed over the E entries of ``pairset`` (a ``weights.PairSet``: frames t, key
    vertices i < j and the source's descriptors there) at positions p (T, N, 3) and normals n (T, N, 3), with
    the mixed weight W_src + α·stopgrad(W_tgt); ``scale``: {term: (E,) per-entry factor or None}; ``focus``:
    L_dist's weight × (1 + focus · W_src), the source's contacts matched more closely than its far pairs;
    ``surface_pen``: where the source's key vertex is behind the other's surface (a fitted source body), L_pen only
    keeps the target's from being behind it (``losses.pen_loss``); ``apart``: there, L_dist only keeps the pair at
    least as far apart as the source's (``Objective.apart``: FITTED_DIST_APART, CAPTURED_DIST_APART); ``state_margin``:
    also 'state', the pairs' contact state at d_min with this margin (``losses.contact_state_loss``, in L_dist's
    units), when not None; ``held``: (E,) bool or None, the entries whose contact the surfaces already hold
    (``SurfaceGate``), left out of the contact state; ``seen``: ((E,), (E,)) bool or None, with ``surface_pen`` the
    entries whose key vertex j (first) or i (second) behind the other's surface the surface barrier reads on the mesh
    (``surface.seen_pairs``): L_pen leaves them."""
    if not len(pairset):
        zero = p.sum() * 0.0
        return {"dist": zero, "dir": zero, "pen": zero}
    d = pair_descriptors(p, n, pairset.t, pairset.i, pairset.j)
    N = p.shape[1]
    n_j = n.reshape(-1, 3).index_select(0, pairset.t * N + pairset.j)
    pen_ji = -dot3(n_j, d.dir)
    w = pairset.w_src + alpha * interaction_weight(d.dist, pairset.tgt_dmin, pairset.tgt_dmax).detach()
    tgt_dist = d.dist
    if apart:                                   # a pair the source overlaps: kept as far apart, not pulled closer
        behind = (pairset.src_pen_ij < 0) | (pairset.src_pen_ji < 0)
        tgt_dist = torch.where(behind, torch.minimum(d.dist, pairset.src_dist), d.dist)
    out = {"dist": dist_loss(tgt_dist, pairset.src_dist, focused(w, pairset.w_src, focus), scale["dist"])}
    if state_margin is not None:
        if held is not None:     # a source contact the surfaces hold: no pull (a source gap is still kept open)
            held = held & (pairset.src_dist < pairset.src_dmin)
        out["state"] = contact_state_loss(d.dist, pairset.src_dist, pairset.src_dmin, pairset.tgt_dmin,
                                          w if held is None else w * ~held, state_margin, scale["dist"])
    # directions of (nearly) touching pairs are noise (and their gradient grows as 1 / distance):
    # L_dir fades from 1 at d_min to 0 at d_min / 2, in the source or in the target
    fade = torch.minimum(pairset.src_dist / pairset.src_dmin, d.dist.detach() / pairset.tgt_dmin)
    fade = (2.0 * fade - 1.0).clamp(0.0, 1.0)
    out["dir"] = dir_loss(d.dir, pairset.src_dir, w * fade, scale["dir"], tgt_norm=d.dist, src_norm=pairset.src_dist)
    ps, w_ij, w_ji = scale["pen"], w, w
    if surface_pen and seen is not None:  # a fitted source's overlap the surface barrier reads on the mesh: no L_pen
        w_ij, w_ji = (w * ~((src < 0) & s) for src, s in zip((pairset.src_pen_ij, pairset.src_pen_ji), seen))
    out["pen"] = (pen_loss(d.pen, pairset.src_pen_ij, w_ij, ps, surface_pen)
                  + pen_loss(pen_ji, pairset.src_pen_ji, w_ji, ps, surface_pen))
    return out
