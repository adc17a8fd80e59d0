"""Metrics between characters retargeted together (ReConForM §6.1). Definitions: docs/metrics.md "Partners".

``evaluate_partners(sources, targets)`` compares K ≥ 2 target clips with their K source clips (the ground
truth, all in one world frame) and returns a flat dict of floats:

- ``partner_contact_f1`` (``_precision``, ``_recall``): key-vertex pairs of two different characters within
  d_min = 5 % of the two characters' mean h_c, per frame, in the target against the source (pooled over pairs
  and frames; the solver's thresholds);
- ``hand_partner_error_mean`` / ``_p90``: at the source's contact entries involving a hand key vertex (a hand
  holding, or resting on, the partner), |target distance − source distance| as a share of the pair's mean
  target h_c;
- ``partner_pen_mean`` / ``_max``: per frame and character, the area share of its surface inside another
  character's body (the capsule cores of ``core.metrics.scores``' self-penetration measure, with the full median
  radius: ``PARTNER_PEN_CORE``);
- ``gaze_angle_error_mean`` (degrees): where a character's source gaze cone (5°) holds a partner key vertex, the
  angle between the target's gaze and the direction to that key vertex;
- ``partner_kept: A's limb ~ B's limb, N frames`` (one per pair of limbs that touch on N ≥ ``KEPT_MIN_FRAMES``
  source frames, the ``KEPT_SHOWN`` with the most over every pair of characters): the share of those frames where
  the two limbs touch in the target too;
- ``source_*`` twins (the source's own value of the same measure, the reference).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from ..character.memo import per_character
from ..errors import CoreError
from ..progress import drive, scaled
from .broadphase import Groups, candidates, capsule_boxes, group_boxes, skin_rows, skinning_matrix
from ..contacts.gaze import GAZE_MAX_DEG, gaze_directions, gaze_setup
from .measures import SELF_PEN_CORE, point_segment_distance, segment_capsules, vertex_areas
from .scores import CONTACT_FRACTION, f1_score
from ..rig.parts import vertex_segments
from ..contacts.partners import box_distance
from .report import KEPT_PREFIX
from ..character.track import ClipTrack

#: capsule radius of the partner-penetration test = this × the median distance of a segment's vertices to its axis
PARTNER_PEN_CORE = 1.0
PARTNER_PEN_MAX_VERTICES = 1500   #: vertices sampled (uniform stride) per body for the partner-penetration test
HAND_LIMBS = ("left_hand", "right_hand")
#: ``partner_kept: …`` entries: a pair of limbs of two characters listed when they touch on this many source frames,
#: the ``KEPT_SHOWN`` with the most, over every pair of characters (a group of five stays a short list)
KEPT_MIN_FRAMES = 5
KEPT_SHOWN = 8
_CHUNK = 64


def _order(source, target) -> np.ndarray:
    """Indices of the target's key vertices in the source's key-vertex order."""
    sn, tn = source.keyverts.names, target.keyverts.names
    if set(sn) != set(tn):
        raise CoreError(f"Key vertices of '{source.name}' and '{target.name}' differ: transfer both from the same "
                        "template size.")
    return np.asarray([tn.index(n) for n in sn])


def _keyverts(track: ClipTrack, order=None) -> np.ndarray:
    ids = track.character.keyverts.vertex_ids
    return track.vertices(ids if order is None else ids[order])


def _contacts(kv: list, heights) -> list:
    """Per character pair (a, b), a < b: (T, N_a, N_b) distances and the contact threshold (metres)."""
    out = []
    for a in range(len(kv)):
        for b in range(a + 1, len(kv)):
            d = np.linalg.norm(kv[a][:, :, None] - kv[b][:, None], axis=-1)
            out.append((a, b, d, CONTACT_FRACTION * 0.5 * (heights[a] + heights[b])))
    return out


class BodyCapsules(NamedTuple):
    """The capsule cores of a character's body (the partner-penetration measure's, and the joint solve's barrier,
    ``solver.barrier``), one per mapped canonical segment with a radius."""
    names: list          # (B,) canonical segment names
    bone: np.ndarray     # (B,) skeleton bone index carrying each capsule
    ends: np.ndarray     # (B, 2, 3) axis ends in that bone's rest frame
    radius: np.ndarray   # (B,) world metres (the armature object's scale applied)


#: body_capsules per character, by identity (a Character is immutable): every window of a Live scrub or of a
#: windowed run builds its barriers on the same characters. {id: (weak reference, BodyCapsules)}
_CAPSULES = {}


def body_capsules(character) -> BodyCapsules:
    """A character's capsule cores: ``core.metrics.scores``' self-penetration capsules, radius × PARTNER_PEN_CORE /
    SELF_PEN_CORE (the full median distance of a segment's vertices to its axis). Computed once per character
    object and kept while it lives: shared, so never modify its arrays."""
    return per_character(_CAPSULES, character, lambda: _body_capsules(character))


def _body_capsules(character) -> BodyCapsules:
    ch = character
    seg, bones, bone_ids = vertex_segments(ch.skeleton, ch.mesh, ch.bone_map)
    caps = segment_capsules(ch, seg, bones, bone_ids)
    M = ch.skeleton.object_matrix
    scale = float(np.cbrt(abs(np.linalg.det(M[:3, :3]))))
    keep = np.nonzero(caps.radius > 0)[0]
    return BodyCapsules([bones[k] for k in keep], caps.bone[keep], np.stack([caps.a[keep], caps.b[keep]], 1),
                        caps.radius[keep] * PARTNER_PEN_CORE / SELF_PEN_CORE * scale)


def capsule_paths(track: ClipTrack, caps: BodyCapsules) -> torch.Tensor:
    """(T, B, 2, 3) float64 world positions of the capsules' axis ends over the track's clip."""
    M = track.character.skeleton.object_matrix
    R = track.arm_rotations[:, caps.bone][:, :, None]                            # (T, B, 1, 3, 3) armature
    P = track.arm_positions[:, caps.bone][:, :, None]
    ends = (R @ torch.as_tensor(caps.ends, dtype=R.dtype)[..., None])[..., 0] + P
    return ends @ torch.as_tensor(M[:3, :3], dtype=R.dtype).T + torch.as_tensor(M[:3, 3], dtype=R.dtype)


def _body(track: ClipTrack) -> dict:
    """A character's sampled surface and capsules over its clip, world space, float32 (kept on its track):
    verts (T, S, 3) ordered by segment (``groups``: a ``core.metrics.broadphase.Groups``, the vertices of no
    segment last), area (S,) summing to 1, capsule ends a, b (T, B, 3), radius (B,), box (lo, hi) (T, 3)."""
    def compute():
        ch = track.character
        caps = body_capsules(ch)
        V = ch.mesh.num_verts
        sample = np.arange(0, V, max(1, int(np.ceil(V / PARTNER_PEN_MAX_VERTICES))))
        seg, bones, _ = vertex_segments(ch.skeleton, ch.mesh, ch.bone_map)
        groups = Groups(np.where(seg[sample] >= 0, seg[sample], len(bones)), len(bones) + 1)
        sample = sample[groups.order]
        area = vertex_areas(ch.mesh)[sample]
        M = ch.skeleton.object_matrix
        A, b = torch.as_tensor(M[:3, :3]), torch.as_tensor(M[:3, 3])
        ends = capsule_paths(track, caps)
        verts = torch.empty((track.num_frames, len(sample), 3), dtype=torch.float32)
        skin = skinning_matrix(ch.mesh.rest_verts[sample], ch.mesh.weight_bones[sample],
                               ch.mesh.weight_values[sample], ch.skeleton.num_bones)
        with torch.no_grad():   # float32, as the metrics' whole-mesh pass (core.metrics.measures._surface_shares)
            for sl, S_rot, S_t in track.skinning_chunks(_CHUNK * 8):
                S = torch.cat([S_rot, S_t[..., None]], -1).float()               # (B, J, 3, 4) armature space
                verts[sl] = skin_rows(skin, S) @ A.T.float() + b.float()
        return dict(verts=verts, area=torch.as_tensor(area / area.sum(), dtype=torch.float32), groups=groups,
                    a=ends[:, :, 0].float(), b=ends[:, :, 1].float(),
                    r=torch.as_tensor(caps.radius, dtype=torch.float32), box=(verts.amin(1), verts.amax(1)))
    return track.memo(("partner_body", PARTNER_PEN_MAX_VERTICES, PARTNER_PEN_CORE), compute)


def _surface_inside(tracks: list):
    """Generator yielding the share done; returns (T, K) the area share of each character's surface inside another
    character's capsules.

    Broad phase: only the frames where the two bodies' boxes overlap, and in them only the (segment, capsule) pairs
    whose boxes meet (``core.metrics.broadphase``), are tested; the narrow test is ``point_segment_distance`` of
    each entry, as a dense test of every vertex against every capsule reads it."""
    K = len(tracks)
    T = tracks[0].num_frames
    bodies = [_body(tr) for tr in tracks]
    yield 0.1
    out = torch.zeros((T, K), dtype=torch.float32)
    for a in range(K):
        for b in range(K):
            if a == b:
                continue
            va, cb = bodies[a], bodies[b]
            near = torch.nonzero(box_distance(*va["box"], *cb["box"]) <= 0, as_tuple=True)[0]
            groups = va["groups"]
            every = torch.ones((groups.num_groups, len(cb["r"])), dtype=torch.bool)
            for s in range(0, near.numel(), _CHUNK):
                fr = near[s:s + _CHUNK]
                v = va["verts"][fr]                                              # (F, S, 3)
                ca, cbb = cb["a"][fr], cb["b"][fr]                               # (F, B, 3)
                hit = torch.zeros(v.shape[:2], dtype=torch.bool)
                for f, i, c in candidates(group_boxes(v, groups), capsule_boxes(ca, cbb, cb["r"]), every, groups):
                    inside = point_segment_distance(v[f, i], ca[f, c], cbb[f, c]) < cb["r"][c]
                    hit[f[inside], i[inside]] = True
                out[fr, a] += (hit.float() * va["area"]).sum(-1)
            yield 0.1 + 0.9 * (a * K + b + 1) / (K * K)
    return out.clamp(max=1.0).numpy()


def _gaze_entries(kv: list, chars: list, motions: list, tracks: list, orders: list, fps: float):
    """Per character c: (frames (F,), partner key vertex (F,) global index) where c's source gaze cone holds a
    partner key vertex (the one nearest its gaze), and c's gaze directions (T, 3)."""
    allp = torch.as_tensor(np.concatenate(kv, 1))
    offs = np.concatenate([[0], np.cumsum([k.shape[1] for k in kv])])
    out = []
    for c in range(len(kv)):
        g = gaze_setup(chars[c], motions[c], tracks[c], orders[c])
        gd = gaze_directions(torch.as_tensor(kv[c]), g, fps)                  # (T, 3)
        eye = offs[c] + g.eye
        others = torch.as_tensor([k for k in range(offs[-1]) if not offs[c] <= k < offs[c + 1]])
        v = allp[:, others] - allp[:, eye:eye + 1]
        cos = (v * gd[:, None]).sum(-1) / v.norm(dim=-1).clamp_min(1e-12)
        out.append((gd.numpy(), eye, others.numpy(), cos.numpy()))
    return out


def _kept_by_limbs(truth: np.ndarray, pred: np.ndarray, la: np.ndarray, lb: np.ndarray, name_a: str,
                   name_b: str) -> list:
    """[(N, 'partner_kept: A's limb ~ B's limb, N frames', share)]: for the pairs of limbs of characters A and B that
    touch on N ≥ ``KEPT_MIN_FRAMES`` source frames, the share of those frames where they touch in the target too (a
    key-vertex pair of the two limbs within d_min); ``truth``, ``pred`` (T, N_a, N_b) contact entries of the source
    and the target, in the source's key-vertex order; ``la``, ``lb`` (N_a,), (N_b,) their key vertices' limbs."""
    rows = []
    for x in np.unique(la):
        for y in np.unique(lb):
            sel = np.ix_(la == x, lb == y)
            src = truth[:, sel[0], sel[1]].any((1, 2))                               # (T,) the limbs touch
            n = int(src.sum())
            if n >= KEPT_MIN_FRAMES:
                kept = float((src & pred[:, sel[0], sel[1]].any((1, 2))).sum() / n)
                rows.append((n, f"{KEPT_PREFIX}{name_a}'s {x.replace('_', ' ')} ~ {name_b}'s {y.replace('_', ' ')}, "
                                f"{n} frames", kept))
    return rows


def _checked(sources, targets) -> tuple:
    """The source and target ClipTracks (built from (Character, Motion) pairs where given so), checked."""
    s_tr = [x if isinstance(x, ClipTrack) else ClipTrack(*x) for x in sources]
    t_tr = [x if isinstance(x, ClipTrack) else ClipTrack(*x) for x in targets]
    K = len(s_tr)
    if K < 2 or len(t_tr) != K:
        raise CoreError("Partner metrics need at least two characters, as many sources as targets.")
    T = s_tr[0].num_frames
    for tr in s_tr + t_tr:
        if tr.num_frames != T:
            raise CoreError(f"'{tr.character.name}' plays {tr.num_frames} frames, not {T}: evaluate the same range.")
        ch = tr.character
        if ch.mesh is None or ch.keyverts is None or not ch.height:
            raise CoreError(f"Character '{ch.name}' needs a body, key vertices and a height for partner metrics.")
    return s_tr, t_tr


def evaluate_partners(sources, targets, fps: float = None) -> dict:
    """Partner metrics of K ≥ 2 retargeted characters (module docstring; docs/metrics.md "Partners").

    Args:
        sources: [(Character, Motion)] or [ClipTrack] of the source clips (one world frame).
        targets: the same for the targets, in the same order (key vertices matched to the sources' by name).
    Returns:
        dict of floats (NaN where a measure has no entry, e.g. no source contact between the characters).
    """
    return drive(evaluating_partners(sources, [targets], fps))[0]


def evaluating_partners(sources, target_sets: list, fps: float = None):
    """Generator yielding the share done (in [0, 1]); returns ``evaluate_partners`` of each set of targets in
    ``target_sets`` (e.g. the joint solve's result and the placed copy-rotations), the sources measured once."""
    s_tr = _checked(sources, target_sets[0])[0]
    sets = [_checked(s_tr, targets)[1] for targets in target_sets]
    K, T = len(s_tr), s_tr[0].num_frames
    fps = float(fps or s_tr[0].fps)
    kv_s = [_keyverts(tr) for tr in s_tr]
    hs = [float(tr.character.height) for tr in s_tr]
    stages = 1 + len(sets)                      # the sources, then each set of targets
    s_contacts = _contacts(kv_s, hs)
    s_share = yield from scaled(_surface_inside(s_tr), 0.0, 0.9 / stages)
    g_src = _gaze_entries(kv_s, [t.character for t in s_tr], [t.motion for t in s_tr], s_tr, [None] * K, fps)
    yield 1.0 / stages
    results = []
    for n, t_tr in enumerate(sets):
        done = (1 + n) / stages
        orders = [_order(s.character, t.character) for s, t in zip(s_tr, t_tr)]
        kv_t = [_keyverts(tr, o) for tr, o in zip(t_tr, orders)]
        ht = [float(tr.character.height) for tr in t_tr]
        out = {}
        # contacts between characters
        c_true, c_pred, errs, kept = [], [], [], []
        for (a, b, ds, lim_s), (_, _, dt, lim_t) in zip(s_contacts, _contacts(kv_t, ht)):
            ct, cp = ds < lim_s, dt < lim_t
            c_true.append(ct.ravel())
            c_pred.append(cp.ravel())
            la = np.asarray(s_tr[a].character.keyverts.limbs)
            lb = np.asarray(s_tr[b].character.keyverts.limbs)
            kept += _kept_by_limbs(ct, cp, la, lb, t_tr[a].character.name, t_tr[b].character.name)
            hand = np.isin(la, HAND_LIMBS)[:, None] | np.isin(lb, HAND_LIMBS)[None, :]     # (N_a, N_b)
            sel = ct & hand[None]
            errs.append(np.abs(dt[sel] - ds[sel]) / (0.5 * (ht[a] + ht[b])))
        c_true, c_pred, errs = np.concatenate(c_true), np.concatenate(c_pred), np.concatenate(errs)
        kept.sort(key=lambda r: (-r[0], r[1]))              # the pairs of limbs that touch longest, of any characters
        out.update({key: value for _, key, value in kept[:KEPT_SHOWN]})
        tp = np.sum(c_true & c_pred)
        out["partner_contact_f1"] = f1_score(c_true, c_pred)
        out["partner_contact_precision"] = float(tp / c_pred.sum()) if c_pred.any() else float("nan")
        out["partner_contact_recall"] = float(tp / c_true.sum()) if c_true.any() else float("nan")
        out["source_partner_contacts"] = float(c_true.sum())
        out["hand_partner_error_mean"] = float(errs.mean()) if errs.size else float("nan")
        out["hand_partner_error_p90"] = float(np.percentile(errs, 90)) if errs.size else float("nan")
        out["source_hand_partner_entries"] = float(errs.size)
        yield done + 0.1 / stages
        # penetration between characters
        share = yield from scaled(_surface_inside(t_tr), done + 0.1 / stages, done + 0.9 / stages)
        for prefix, sh in (("", share), ("source_", s_share)):
            out[prefix + "partner_pen_mean"] = float(sh.mean())
            out[prefix + "partner_pen_max"] = float(sh.max())
        # gaze
        g_tgt = _gaze_entries(kv_t, [t.character for t in t_tr], [None] * K, [None] * K, orders, fps)
        cmax = math.cos(math.radians(GAZE_MAX_DEG))
        err_t, err_s = [], []
        for (_, _, _, cos_s), (_, _, _, cos_t) in zip(g_src, g_tgt):
            best = cos_s.argmax(1)                                             # nearest partner key vertex
            rows = np.nonzero(cos_s[np.arange(T), best] > cmax)[0]
            err_s.append(np.degrees(np.arccos(np.clip(cos_s[rows, best[rows]], -1, 1))))
            err_t.append(np.degrees(np.arccos(np.clip(cos_t[rows, best[rows]], -1, 1))))
        err_t, err_s = np.concatenate(err_t), np.concatenate(err_s)
        out["gaze_angle_error_mean"] = float(err_t.mean()) if err_t.size else float("nan")
        out["source_gaze_angle_mean"] = float(err_s.mean()) if err_s.size else float("nan")
        out["source_gaze_frames"] = float(err_t.size)
        results.append(out)
        yield (2 + n) / stages
    return results


__all__ = ["BodyCapsules", "HAND_LIMBS", "KEPT_PREFIX", "PARTNER_PEN_CORE", "body_capsules", "capsule_paths",
           "evaluate_partners", "evaluating_partners"]
