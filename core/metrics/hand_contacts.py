"""Hand contacts on the skin: where a hand rests on the body in the source, whether it rests on the same region's skin
in the target (docs/metrics.md, ``hand_contact_held``), read in ``core.metrics.mesh_volume``'s pass.

The key-vertex contacts cannot see a hand that hangs off the body: a hand a few centimetres off a hip keeps its key
vertices within d_min of the hip's, and a hand resting flat on a hip may have none within it. This measure reads the
mesh. The source's hand **touches** a body region on a frame when a vertex of the hand's surface lies within
``TOUCH_FRACTION`` of its height h_c of a vertex of that region's surface (the mesh measure's surface: one vertex per
``mesh_volume.SAMPLE_CELL`` cube), counting only the parts that do not share a joint region with the hand (its own
forearm and upper arm never count). The entries are (frame, hand, region) with ``REGIONS``. On the source's touches, the
target's hand is **held** when it lies within ``HELD_FRACTION`` of its h_c of the same region, no deeper inside it than
the source's hand is (scaled to the target's h_c; none for a fitted body) + ``SUNK_FRACTION`` of its h_c, **sunk** when
deeper, and off the skin otherwise; the **gap**, the target hand's distance to the region's skin there (p50, p95), is
read out to ``WIDE_FRACTION`` of h_c (beyond it the gap reads that). The depth is a hand vertex's below its nearest
vertex of the region along that vertex's normal, as ``mesh_volume.depths`` reads a probe's.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

#: the body regions a hand's contact is matched on (canonical core bones); a hand on a hip that lands on the thigh
#: of a wider body has moved region
REGIONS = (
    ("trunk", ("hips", "spine", "chest", "upper_chest", "left_shoulder", "right_shoulder")),
    ("head", ("neck", "head")),
    ("left_arm", ("left_upper_arm", "left_lower_arm", "left_hand")),
    ("right_arm", ("right_upper_arm", "right_lower_arm", "right_hand")),
    ("left_leg", ("left_upper_leg", "left_lower_leg", "left_foot", "left_toes")),
    ("right_leg", ("right_upper_leg", "right_lower_leg", "right_foot", "right_toes")),
)
HANDS = ("left_hand", "right_hand")
#: the source's hand touches a region when its skin is within this share of h_c of the region's (vertex to vertex;
#: the solver's ``reach.TOUCH``): a hand resting on the skin, not one passing near it
TOUCH_FRACTION = 0.005
#: the target's hand holds that contact when its skin is within this share of its h_c of the region's (the surface's
#: vertex spacing, 8 mm, allowed for)
HELD_FRACTION = 0.01
#: a hand deeper than this share of h_c inside a region it touches, beyond the source's own depth there, is sunk
SUNK_FRACTION = 0.01
#: the gap on the source's touches is read out to this share of the target's h_c
WIDE_FRACTION = 0.05
_BLOCK = 1 << 21      #: distance entries per block


class HandSurface(NamedTuple):
    """The hands and what they are read against, as indices into a ``mesh_volume.BodySurface``'s ``ids``.

    hands: per hand of ``HANDS``, None where the character has no such part, else (its vertices (H,), and per part
    it is read against a tuple (the part's index, its region's index into ``REGIONS``, its vertices (V,), (V,) bool:
    the vertex lies on the rim of what the hand is read against, beside a part it is not (``BodySurface.rim``: no
    depth there)))."""

    hands: tuple


def hand_surface(part: np.ndarray, bones: tuple, allowed: np.ndarray, rim: np.ndarray) -> HandSurface:
    """The HandSurface of a body surface whose vertices' parts are ``part`` (M,) (indices into ``bones``, canonical
    names); ``allowed`` (G, G), ``rim`` (G, M): ``mesh_volume.BodySurface``'s."""
    region_of = {name: r for r, (_, members) in enumerate(REGIONS) for name in members}
    hands = []
    for name in HANDS:
        if name not in bones:
            hands.append(None)
            continue
        g = bones.index(name)
        parts = []
        for c, other in enumerate(bones):
            verts = np.nonzero(part == c)[0]
            if allowed[g, c] and other in region_of and len(verts):
                parts.append((c, region_of[other], verts, rim[g][verts]))
        hands.append((np.nonzero(part == g)[0], tuple(parts)))
    return HandSurface(tuple(hands))


def region_gaps(hs: HandSurface, x: torch.Tensor, normals, margin: torch.Tensor, boxes: tuple) -> tuple:
    """Each hand against each region on B frames: (gap (B, 2, R), the hand's distance to the region's surface (vertex to
    vertex; 0 where the hand is inside it), +inf beyond ``margin`` (B,); depth (B, 2, R), how deep the hand's surface
    lies inside the region: the deepest −(p − q)·n_q of a hand vertex p and its nearest vertex q of the region, ≥ 0, 0
    on the rim), armature units as ``x`` (B, M, 3), the surface's vertices; ``normals(frames (K,), vertices (K,))`` ->
    (K, 3) their unit normals; ``boxes``: (B, G, 3) minima and maxima of each part's vertices on each frame. A frame
    whose margin is 0 is not read.

    Broad phase: the parts whose box meets the hand's grown by the margin, and of those the vertices inside it; per
    part, each frame's candidates padded into one matrix against the hand's vertices.
    """
    B, R = x.shape[0], len(REGIONS)
    gap = torch.full((B, len(HANDS), R), float("inf"), dtype=x.dtype)
    depth = torch.zeros((B, len(HANDS), R), dtype=x.dtype)
    inf = float("inf")
    live = margin > 0                                                         # (B,) the frames read
    for h, entry in enumerate(hs.hands):
        if entry is None or len(entry[0]) == 0:
            continue
        own, parts = entry
        hv = x[:, torch.as_tensor(own)]                                       # (B, H, 3)
        lo, hi = hv.amin(1) - margin[:, None], hv.amax(1) + margin[:, None]   # (B, 3)
        nearest = torch.full((R,) + hv.shape[:2], inf, dtype=x.dtype)        # each hand vertex's nearest, per region
        signed = torch.zeros_like(nearest)                                    # its depth below that vertex
        for c, r, verts, rim in parts:
            frames = torch.nonzero(((boxes[0][:, c] <= hi) & (boxes[1][:, c] >= lo)).all(-1) & live)[:, 0]
            if len(frames) == 0:
                continue
            verts, rim = torch.as_tensor(verts), torch.as_tensor(rim)
            xv = x[frames[:, None], verts[None]]                              # (n, V, 3)
            b, v = torch.nonzero(((xv >= lo[frames, None]) & (xv <= hi[frames, None])).all(-1), as_tuple=True)
            if len(b) == 0:
                continue
            counts = torch.bincount(b, minlength=len(frames))
            rank = torch.arange(len(b)) - (torch.cumsum(counts, 0) - counts)[b]
            Q = torch.zeros((len(frames), int(counts.max()), 3), dtype=x.dtype)   # each frame's candidates, padded
            Q[b, rank] = xv[b, v]
            slot = torch.full(Q.shape[:2], -1, dtype=torch.long)              # index into verts, -1: padding
            slot[b, rank] = v
            P = hv[frames]                                                    # (n, H, 3)
            step = max(1, _BLOCK // (Q.shape[1] * P.shape[1]))
            for a in range(0, len(frames), step):                             # (n, K, H) distances, a block at a time
                Qa, Pa, fa = Q[a:a + step], P[a:a + step], frames[a:a + step]
                d2 = torch.baddbmm((Qa * Qa).sum(-1)[..., None] + (Pa * Pa).sum(-1)[:, None], Qa, Pa.transpose(1, 2),
                                   alpha=-2.0).masked_fill((slot[a:a + step] < 0)[..., None], inf)
                best, arg = d2.min(1)                                         # (n, H) each hand vertex's nearest
                best = best.clamp_min(0.0).sqrt()
                fb, j = torch.nonzero(best < nearest[r, fa], as_tuple=True)
                k = slot[a:a + step][fb, arg[fb, j]]
                q = verts[k]
                s = ((Pa[fb, j] - x[fa[fb], q]) * normals(fa[fb], q)).sum(-1)
                nearest[r, fa[fb], j] = best[fb, j]
                signed[r, fa[fb], j] = torch.where(rim[k], torch.zeros_like(s), -s)
        g = nearest.amin(-1).T                                                # (B, R)
        deep = torch.where(torch.isfinite(nearest), signed, torch.zeros_like(signed)).amax(-1).T.clamp_min(0.0)
        g = torch.where(deep > 0, torch.zeros_like(g), g)                     # inside: no gap
        gap[:, h] = torch.where(g <= margin[:, None], g, torch.full_like(g, inf))
        depth[:, h] = torch.where(torch.isfinite(gap[:, h]), deep, torch.zeros_like(deep))
    return gap, depth


class HandTally:
    """Each hand's gap to each region and depth inside it per frame of one clip of T frames (metres; the gap +inf
    beyond what was read), filled a stretch of frames at a time."""

    def __init__(self, T: int):
        self.gap = np.full((T, len(HANDS), len(REGIONS)), np.inf)
        self.depth = np.zeros((T, len(HANDS), len(REGIONS)))

    def add(self, gap: np.ndarray, depth: np.ndarray, a: int, b: int, first: int):
        """Clip frames a..b-1 from ``gap`` and ``depth``, the measures of clip frames ``first`` onwards."""
        self.gap[a:b] = gap[a - first:b - first]
        self.depth[a:b] = depth[a - first:b - first]


def touching(gap: np.ndarray, height: float, fraction: float = TOUCH_FRACTION) -> np.ndarray:
    """(…,) bool: the entries where a hand is within ``fraction`` of h_c of a region (a source's touch), from their
    gaps (metres) and h_c."""
    return gap <= fraction * height


def hand_scores(source: HandTally, target: HandTally, source_height: float, target_height: float,
                fitted: bool = False) -> dict:
    """The hand-contact keys of docs/metrics.md, over the source's touches: the share the target holds on the skin
    (within ``HELD_FRACTION`` of its h_c, no deeper inside than the source's own depth there, scaled to the target's
    h_c, + ``SUNK_FRACTION`` of it), the share sunk deeper, the gap's p50 and p95 (metres and share of the target's
    h_c), and how many touches the source has (hand-region-frames). ``fitted``: the source's body is a template
    fitted to its skeleton, whose overlaps are the fit's: its depth allows nothing.
    """
    truth = touching(source.gap, source_height)
    n = int(truth.sum())
    touch = touching(target.gap[truth], target_height, HELD_FRACTION)
    own = 0.0 if fitted else source.depth[truth] * (target_height / source_height)
    allowance = own + SUNK_FRACTION * target_height
    sunk = target.depth[truth] > allowance
    out = {"hand_contact_held": float(np.mean(touch & ~sunk)) if n else float("nan"),
           "hand_contact_sunk": float(np.mean(sunk)) if n else float("nan"),
           "source_hand_contacts": float(n)}
    gaps = np.minimum(target.gap[truth], WIDE_FRACTION * target_height)
    for q in (50, 95):
        v = float(np.percentile(gaps, q)) if n else float("nan")
        out[f"hand_contact_gap_p{q}"] = v
        out[f"hand_contact_gap_p{q}_height"] = v / target_height
    return out


__all__ = ["HANDS", "HELD_FRACTION", "HandSurface", "HandTally", "REGIONS", "SUNK_FRACTION", "TOUCH_FRACTION",
           "WIDE_FRACTION", "hand_scores", "hand_surface", "region_gaps", "touching"]
