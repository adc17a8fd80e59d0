"""Which segment pairs the barriers leave free, frame by frame: those whose limbs touch in the source, within one
body (``own_contacts``, for a character's own barrier) and between two characters (``partner_contacts``, for the
barrier between them). A contact the source has stays a contact however the targets' builds differ
(docs/solver.md "Barrier", "Contacts the source couple has")."""

from __future__ import annotations

import torch

from ..rig.humanoid import limb_of
from ..contacts.partners import close_entries
from ..descriptors.weights import MIN_FRACTION

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


def _limb_touch(T: int, names, limbs_a, limbs_b, t, i, j, device) -> tuple:
    """((T, L, L) bool limb contacts, {limb name: row}): entry (t, i, j) sets row limb of key vertex i of ``limbs_a``,
    column limb of key vertex j of ``limbs_b`` (limb names per key vertex), over the ``names`` (every limb of the
    key vertices and of the capsules) in sorted order."""
    index = {n: k for k, n in enumerate(sorted(names))}
    la, lb = (torch.as_tensor([index[n] for n in limbs], device=device) for limbs in (limbs_a, limbs_b))
    touch = torch.zeros((T, len(index), len(index)), dtype=torch.bool, device=device)
    touch[t, la[i], lb[j]] = True
    return touch, index


def _segments(touch: torch.Tensor, index: dict, caps_a, caps_b) -> torch.Tensor:
    """(T, B_a, B_b) the limb contacts ``touch`` (T, L, L) read at the limbs of two bodies' capsule segments."""
    seg = [torch.as_tensor([index[limb_of(n)] for n in c.names], device=touch.device) for c in (caps_a, caps_b)]
    return touch[:, seg[0]][:, :, seg[1]]


def own_contacts(job, caps) -> torch.Tensor:
    """(T, B, B) bool: the target's capsule segments whose limbs touch in the source at that frame (a key-vertex
    pair of those limbs closer than its d_min, ``job.objective``'s source pairs): the self barrier leaves them
    free there, so a hand on a hip or a clap stays a contact however bulky the target. (A hand's arm is not freed
    with it here, as ``partner_contacts`` frees it: measured, the forearms then sink into the torso, docs/solver.md
    "Contacts the source couple has".)"""
    ps = job.objective.pairs.active(None, 0.0)
    touch = torch.nonzero(ps.src_dist < ps.src_dmin, as_tuple=True)[0]
    limbs, index = _limb_touch(job.num_frames, set(job.limbs) | {limb_of(n) for n in caps.names}, job.limbs,
                               job.limbs, ps.t[touch], ps.i[touch], ps.j[touch], job.device)
    return _segments(limbs | limbs.transpose(1, 2), index, caps, caps)


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
            names = set(ma.limbs) | set(mb.limbs) | {limb_of(n) for c in (a, b) for n in capsules[c].names}
            touch, index = _limb_touch(ma.num_frames, names, ma.limbs, mb.limbs, t, i, j, ma.device)
            touch = with_arms(touch, index)
            k = int(round(CONTACT_HOLD_S * ma.fps))
            if k > 0 and ma.num_frames > 1:          # (L·L, 1, T) max over each frame's ±k neighbours
                x = touch.reshape(touch.shape[0], -1).T[:, None].float()
                x = torch.nn.functional.max_pool1d(x, 2 * k + 1, stride=1, padding=k)
                touch = (x[:, 0].T > 0).reshape(touch.shape)
            out[(a, b)] = _segments(touch, index, capsules[a], capsules[b])
            out[(b, a)] = out[(a, b)].transpose(1, 2)
    return out


__all__ = ["CONTACT_HOLD_S", "own_contacts", "partner_contacts", "with_arms"]
