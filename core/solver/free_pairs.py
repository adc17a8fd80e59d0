"""Which segment pairs the barriers leave free, frame by frame: those whose limbs touch in the source, within one
body (``own_contacts``, for a character's own barrier) and between two characters (``partner_contacts``, for the
barrier between them). A contact the source has stays a contact however the targets' builds differ
(docs/solver.md "Barrier", "Contacts the source couple has")."""

from __future__ import annotations

import torch

from ..humanoid import limb_of
from ..partners import close_entries
from ..weights import MIN_FRACTION

#: seconds: a contact of the source couple frees its segments from this long before it starts to this long after it
#: ends (``partner_contacts``: the hand arriving and leaving; 12 frames at 120 fps, 3 at 30)
CONTACT_HOLD_S = 0.1


def with_arms(touch: torch.Tensor, index: dict) -> torch.Tensor:
    """(T, L, L) bool limb contacts (rows one body's limbs, columns the other's, ``index`` their names' positions)
    with each hand's contacts taken by its arm too, on either side: the forearm of a hand on a partner's back or
    hand lies along what the hand touches."""
    out = touch.clone()
    for side in ("left", "right"):
        hand, arm = index.get(f"{side}_hand"), index.get(f"{side}_arm")
        if hand is not None and arm is not None:
            out[:, arm] |= touch[:, hand]
            out[:, :, arm] |= touch[:, :, hand]
    return out


def own_contacts(job, caps) -> torch.Tensor:
    """(T, B, B) bool: the target's capsule segments whose limbs touch in the source at that frame (a key-vertex
    pair of those limbs closer than its d_min, ``job.objective``'s source pairs): the self barrier leaves them
    free there, so a hand on a hip or a clap stays a contact however bulky the target. (A hand's arm is not freed
    with it here, as ``partner_contacts`` frees it: measured, the forearms then sink into the torso, docs/solver.md
    "Contacts the source couple has".)"""
    ps = job.objective.pairs.active(None, 0.0)
    touch = torch.nonzero(ps.src_dist < ps.src_dmin, as_tuple=True)[0]
    names = sorted(set(job.limbs) | {limb_of(n) for n in caps.names})
    index = {n: k for k, n in enumerate(names)}
    vl = torch.as_tensor([index[n] for n in job.limbs], device=job.device)
    limbs = torch.zeros((job.num_frames, len(names), len(names)), dtype=torch.bool, device=job.device)
    t, li, lj = ps.t[touch], vl[ps.i[touch]], vl[ps.j[touch]]
    limbs[t, li, lj] = True
    limbs[t, lj, li] = True
    seg = torch.as_tensor([index[limb_of(n)] for n in caps.names], device=job.device)
    return limbs[:, seg][:, :, seg]


def partner_contacts(members, capsules) -> dict:
    """{(a, b): (T, B_a, B_b) bool} for every ordered pair of different members: the capsule segments of a and b
    whose limbs touch in the source couple about that frame (a key vertex of each closer than d_min = 5 % of their
    mean source height, what the pair terms between them call a contact, within ``CONTACT_HOLD_S``), a hand's
    contact taking its arm along (``with_arms``). The barrier between them leaves those free there, as
    ``own_contacts`` does within one body, so a hand on the partner's back, shoulder or head stays a contact whatever
    the two targets' builds (docs/solver.md "Contacts the source couple has")."""
    out = {}
    for a in range(len(members)):
        for b in range(a + 1, len(members)):
            ma, mb = members[a], members[b]
            t, i, j = close_entries(ma.objective.src_p, mb.objective.src_p, MIN_FRACTION * 0.5 * (ma.h_src + mb.h_src))
            names = sorted(set(ma.limbs) | set(mb.limbs) | {limb_of(n) for c in (a, b) for n in capsules[c].names})
            index = {n: k for k, n in enumerate(names)}
            L = len(names)
            limb = [torch.as_tensor([index[n] for n in m.limbs], device=ma.device) for m in (ma, mb)]
            touch = torch.zeros((ma.num_frames, L, L), dtype=torch.bool, device=ma.device)
            touch[t, limb[0][i], limb[1][j]] = True
            touch = with_arms(touch, index)
            k = int(round(CONTACT_HOLD_S * ma.fps))
            if k > 0 and ma.num_frames > 1:          # (L·L, 1, T) max over each frame's ±k neighbours
                x = touch.reshape(touch.shape[0], -1).T[:, None].float()
                x = torch.nn.functional.max_pool1d(x, 2 * k + 1, stride=1, padding=k)
                touch = (x[:, 0].T > 0).reshape(touch.shape)
            seg = [torch.as_tensor([index[limb_of(n)] for n in capsules[c].names], device=ma.device) for c in (a, b)]
            out[(a, b)] = touch[:, seg[0]][:, :, seg[1]]
            out[(b, a)] = out[(a, b)].transpose(1, 2)
    return out


__all__ = ["CONTACT_HOLD_S", "own_contacts", "partner_contacts", "with_arms"]
