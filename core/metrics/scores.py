"""Quality metrics of a retargeted clip against its source (ReConForM §5, Table 1). Definitions: docs/metrics.md.

``evaluate(source, source_motion, target, target_motion)`` returns a flat dict of floats (``evaluation``: the same
as a generator of progress fractions, for long clips; ``evaluations``: several clips of one target against one
source, the source measured once). Each clip is measured per frame by ``core.metrics.measures`` (joints, feet, key
vertices, one skinning pass over the whole mesh); what the scores need is gathered a stretch of frames at a time
(``chunk_ranges``): the F1 scores as confusion counts, the jerks as sums, counts and maxima, and compact per-frame
arrays (the floor and self-penetration shares, the feet's heights and speeds: what the means, maxima and the
AUCs' Mann–Whitney ranks read). With ``chunk`` frames (a windowed retarget, ``core.pipeline.windows``) every clip is
measured ``chunk`` frames at a time from a track of those frames, so the memory follows the chunk, not the
clip, beyond those per-frame arrays; with one chunk (the default) the given tracks are measured whole (a
retarget passes the source's own track, shared with the solver).
"""

from __future__ import annotations

import numpy as np

from ..errors import CoreError
from ..contacts.feet import lock_runs, window_half
from .measures import Measures, foot_speed_windowed, jerk_magnitude, measuring, pairs_closer
from ..progress import drive, scaled
from ..character.track import ClipTrack
from ..types import Character, Motion
from ..descriptors.weights import allowed_pairs
from .contact_depth import MeshTally, contact_entries, mesh_scores
from .hand_contacts import TOUCH_FRACTION, WIDE_FRACTION, HandTally, hand_scores, touching
from .mesh_volume import mesh_measuring

GROUNDED_FRACTION = 0.01     #: grounded: |foot height| <= 1 % of h_c
LOCKED_FRACTION = 0.01       #: locked: windowed horizontal foot speed < 1 % of h_c per second (docs/metrics.md)
LOCKED_STRICT_FRACTION = 0.001  #: the paper's printed 0.1 % h_c / s, on the raw 1-frame speed (locked_strict_*)
CONTACT_FRACTION = 0.05      #: key-vertex contact: pair distance < d_min = 5 % of h_c
JERK_SPAN = 3                #: jerk at frame t reads frames t..t+3 (a forward third difference)


def f1_counts(tp, fp, fn) -> float:
    """F1 from confusion counts: 2·tp / (2·tp + fp + fn) (NaN when all three are 0)."""
    if tp + fp + fn == 0:
        return float("nan")
    return float(2 * tp / (2 * tp + fp + fn))


def f1_score(truth: np.ndarray, pred: np.ndarray) -> float:
    """F1 of binary predictions against binary truth (NaN when both have no positives)."""
    truth, pred = np.asarray(truth, bool), np.asarray(pred, bool)
    return f1_counts(np.sum(truth & pred), np.sum(~truth & pred), np.sum(truth & ~pred))


def roc_auc(truth: np.ndarray, score: np.ndarray) -> float:
    """Area under the ROC curve of ``score`` for binary ``truth`` (Mann–Whitney, ties count half);
    NaN when truth has a single class."""
    truth = np.asarray(truth, bool)
    score = np.asarray(score, float)
    npos, nneg = truth.sum(), (~truth).sum()
    if npos == 0 or nneg == 0:
        return float("nan")
    order = np.argsort(score, kind="mergesort")
    _, inverse, counts = np.unique(score[order], return_inverse=True, return_counts=True)
    first = np.cumsum(counts) - counts                  # rank - 1 of each distinct value's first occurrence
    ranks = np.empty(len(score))
    ranks[order] = (first + 0.5 * (counts + 1))[inverse]   # tied values share their average rank
    return float((ranks[truth].sum() - npos * (npos + 1) / 2) / (npos * nneg))


class _Jerk:
    """Sum, count and maximum of jerk magnitudes, gathered a stretch of frames at a time."""

    def __init__(self):
        self.sum, self.count, self.max = 0.0, 0, 0.0

    def add(self, j: np.ndarray):
        if j.size:
            self.sum += j.sum()
            self.max = max(self.max, float(j.max())) if self.count else float(j.max())
            self.count += j.size

    def mean(self) -> float:
        return float(self.sum / self.count) if self.count else 0.0


class _Tally:
    """What the scores need of one clip of T frames, filled a stretch of frames at a time (``add``): per frame the
    floor and self-penetration shares (T,), the feet's heights and windowed speeds (2, T) and one-frame speeds
    (2, T − 1); the jerk of the compared joints and of the hips as sums, counts and maxima."""

    def __init__(self, T: int, fps: float = 30.0):
        self.T, self.fps = T, float(fps)
        self.floor, self.self_pen = np.zeros(T), np.zeros(T)
        self.height, self.speed = np.zeros((2, T)), np.zeros((2, T))
        self.step = np.zeros((2, max(T - 1, 0)))
        self.jerk, self.root_jerk = _Jerk(), None

    def add(self, m: Measures, joints: list, fps: float, a: int, b: int, first: int):
        """Clip frames a..b-1 from ``m``, the measures of clip frames ``first`` onwards (which include the
        neighbours ``chunk_ranges`` adds); ``joints``: the names of the joints whose jerk is compared."""
        T, own = self.T, slice(a - first, b - first)
        self.floor[a:b], self.self_pen[a:b] = m.floor_share[own], m.self_share[own]
        self.height[:, a:b] = m.foot_height[:, own]
        self.speed[:, a:b] = foot_speed_windowed(m, fps, first=first, num_frames=T, frames=np.arange(a, b))
        e = min(b, T - 1)                                  # the one-frame speed of frame t reads t + 1
        self.step[:, a:e] = m.foot_step_speed[:, a - first:e - first]
        e = min(b, T - JERK_SPAN)
        p = m.joints[a - first:max(e, a) - first + JERK_SPAN]
        self.jerk.add(jerk_magnitude(p[:, [m.joint_names.index(n) for n in joints]], fps))
        if "hips" in m.joint_names:
            self.root_jerk = self.root_jerk or _Jerk()
            self.root_jerk.add(jerk_magnitude(p[:, m.joint_names.index("hips")], fps))


class _Contacts:
    """Confusion counts of the target's key-vertex contacts against the source's, gathered chunk by chunk."""

    def __init__(self):
        self.tp = self.fp = self.fn = self.true = self.pred = 0

    def add(self, truth: np.ndarray, pred: np.ndarray):
        self.tp += int(np.sum(truth & pred))
        self.fp += int(np.sum(~truth & pred))
        self.fn += int(np.sum(truth & ~pred))
        self.true += int(truth.sum())
        self.pred += int(pred.sum())


def chunk_ranges(num_frames: int, chunk: int = None, fps: float = 30.0) -> list:
    """[(a, b, first, stop)]: the clip's frames a..b-1 are scored from measures of frames first..stop-1, which add
    the neighbours a frame's scores read (the windowed foot speed's ``feet.window_half`` frames each side, the
    one-frame speed's next frame, the jerk's three); chunks of ``chunk`` frames, one for the whole clip when
    ``chunk`` is None or not shorter than the clip."""
    T = num_frames
    if chunk is None or chunk >= T:
        return [(0, T, 0, T)]
    if chunk < 1:
        raise CoreError(f"Metrics in chunks of {chunk} frames: use at least one frame.")
    before = window_half(fps)
    after = max(before, JERK_SPAN)
    return [(a, min(T, a + chunk), max(0, a - before), min(T, a + chunk + after)) for a in range(0, T, chunk)]


def _rows(ground, first: int, stop: int):
    """The source's floor over clip frames first..stop-1: a level or a field as it is, (T,) levels sliced."""
    return ground if callable(ground) or np.ndim(ground) == 0 else np.asarray(ground)[first:stop]


def _scores(s: _Tally, t: _Tally, contacts: _Contacts, hs: float, ht: float) -> dict:
    """Every metric of docs/metrics.md from the source's and the target's tallies (their heights h_c)."""
    out = {"frames": float(s.T)}
    for name, tr in (("", t), ("source_", s)):
        out[name + "jerk_mean"] = tr.jerk.mean()
        out[name + "jerk_max"] = tr.jerk.max
        if tr.root_jerk is not None:   # the root alone: how smoothly it follows the ground (a terrain's steps)
            out[name + "root_jerk_mean"] = tr.root_jerk.mean()
            out[name + "root_jerk_max"] = tr.root_jerk.max
        out[name + "floor_pen_mean"] = float(tr.floor.mean())
        out[name + "floor_pen_max"] = float(tr.floor.max())
        out[name + "self_pen_mean"] = float(tr.self_pen.mean())
        out[name + "self_pen_max"] = float(tr.self_pen.max())
    # feet (both feet pooled)
    g_true = (np.abs(s.height) <= GROUNDED_FRACTION * hs).ravel()
    g_pred = (np.abs(t.height) <= GROUNDED_FRACTION * ht).ravel()
    out["grounded_f1"] = f1_score(g_true, g_pred)
    out["grounded_auc"] = roc_auc(g_true, -(np.abs(t.height) / ht).ravel())
    l_true = lock_runs(s.speed < LOCKED_FRACTION * hs, s.fps).ravel()     # runs of at least 1/30 s
    l_pred = lock_runs(t.speed < LOCKED_FRACTION * ht, t.fps).ravel()
    out["locked_f1"] = f1_score(l_true, l_pred)
    out["locked_auc"] = roc_auc(l_true, -(t.speed / ht).ravel())
    r_true = (s.step < LOCKED_STRICT_FRACTION * hs).ravel()
    r_pred = (t.step < LOCKED_STRICT_FRACTION * ht).ravel()
    out["locked_strict_f1"] = f1_score(r_true, r_pred)
    out["locked_strict_auc"] = roc_auc(r_true, -(t.step / ht).ravel())
    out["source_grounded_share"] = float(g_true.mean())
    # the source's own feet, never under its floor: what a target copying them exactly but standing on the floor
    # would score (a source that sinks through its floor caps the grounded F1 of every floor-respecting target)
    out["source_grounded_f1_clamped"] = f1_score(
        g_true, (np.clip(s.height, 0.0, None) <= GROUNDED_FRACTION * hs).ravel())
    out["source_locked_share"] = float(l_true.mean()) if l_true.size else float("nan")
    out["source_locked_strict_share"] = float(r_true.mean()) if r_true.size else float("nan")
    if contacts is not None:           # key-vertex contacts
        c = contacts
        out["contact_f1"] = f1_counts(c.tp, c.fp, c.fn)
        out["contact_precision"] = float(c.tp / max(c.pred, 1)) if c.pred else float("nan")
        out["contact_recall"] = float(c.tp / max(c.true, 1)) if c.true else float("nan")
        out["source_contacts"] = float(c.true)
    return out


def evaluate(source: Character, source_motion: Motion, target: Character, target_motion: Motion,
             terrain=None, source_ground=0.0, *, source_track: ClipTrack = None,
             target_track: ClipTrack = None, chunk: int = None, series: list = None) -> dict:
    """``evaluation`` run to its end: every metric of docs/metrics.md (a flat dict of floats)."""
    return drive(evaluation(source, source_motion, target, target_motion, terrain, source_ground,
                            source_track=source_track, target_track=target_track, chunk=chunk, series=series))


def evaluation(source: Character, source_motion: Motion, target: Character, target_motion: Motion,
               terrain=None, source_ground=0.0, *, source_track: ClipTrack = None,
               target_track: ClipTrack = None, chunk: int = None, series: list = None):
    """``evaluations`` of one target clip: a generator of the share done; returns its dict of metrics."""
    out = yield from evaluations(source, source_motion, target, [target_motion], terrain, source_ground,
                                 source_track=source_track, target_tracks=[target_track], chunk=chunk, series=series)
    return out[0]


def evaluations(source: Character, source_motion: Motion, target: Character, target_motions: list,
                terrain=None, source_ground=0.0, *, source_track: ClipTrack = None, target_tracks: list = None,
                chunk: int = None, series: list = None):
    """Generator yielding the share done (in [0, 1], through the whole-mesh passes of every clip); returns one dict
    of every metric of docs/metrics.md per clip of ``target_motions``, each against ``source_motion`` (the
    ground truth, measured once).

    Args:
        terrain: optional HeightField under the target.
        source_ground: the source's floor: a level (metres) or a (T,) array of levels per frame (the solve's
            ``SolveJob.source_ground_level``; ``core.contacts.ground``).
        source_track, target_tracks: the clips' ClipTracks where the caller has them (``core.pipeline.retarget`` passes
            the source's, so its measures are computed once for the solve and the metrics), used when the clip is
            measured in one chunk; a target's track is let go once measured.
        chunk: measure ``chunk`` frames at a time (``chunk_ranges``), each from a ClipTrack of those frames
            (None: the whole clip at once). The metrics are the same either way (tests/core/test_metrics_chunks.py).
        series: a list to which the per-frame mesh series of each target clip are appended, one dict per clip:
            'mesh_pen' (T,) the mesh self-penetration share, 'contact_depth' (T,) the frame's contact depth in
            metres (NaN: no source contact on that frame); what ``mesh_pen_max`` and ``contact_depth_p*`` read
            (the bench's worst frames, tools/bench/worst_frames.py).
    Returns:
        [dict of floats]: jerk_mean/max and root_jerk_mean/max (m/s³), floor_pen_mean/max and self_pen_mean/max
        (area shares in [0, 1]), grounded_f1/auc, locked_f1/auc, contact_f1/precision/recall, and source_*
        twins of the per-clip measures.
    """
    T = source_motion.num_frames
    if any(m.num_frames != T for m in target_motions):
        raise CoreError("Source and target clips have different frame counts: evaluate the same range.")
    for c in (source, target):
        if not c.height:
            raise CoreError(f"Character '{c.name}' has no height h_c.")
    kv = source.keyverts is not None and target.keyverts is not None
    if kv:
        order = [target.keyverts.names.index(n) for n in source.keyverts.names
                 if n in target.keyverts.names]
        kv = len(order) == len(source.keyverts)
    s_kv = source.keyverts.vertex_ids if kv else None
    t_kv = target.keyverts.vertex_ids[order] if kv else None
    ii, jj = np.nonzero(allowed_pairs(source.keyverts.limbs, None, True)) if kv else (None, None)
    hs, ht = float(source.height), float(target.height)
    tracks = list(target_tracks) if target_tracks is not None else [None] * len(target_motions)
    target_tracks = None               # this list only: a target's track is let go once measured
    ranges = chunk_ranges(T, chunk, max([source_motion.fps] + [m.fps for m in target_motions]))
    whole = len(ranges) == 1
    s_tally, t_tallies = _Tally(T, source_motion.fps), [_Tally(T, m.fps) for m in target_motions]
    contacts = [_Contacts() if kv else None for _ in target_motions]
    s_mesh, t_meshes = MeshTally(T), [MeshTally(T) for _ in target_motions]   # core.metrics.contact_depth
    s_hands, t_hands = HandTally(T), [HandTally(T) for _ in target_motions]   # core.metrics.hand_contacts
    sizes = (source.mesh.num_verts, target.mesh.num_verts)    # the passes' costs, roughly
    work = sum(stop - first for _, _, first, stop in ranges) * (sizes[0] + len(target_motions) * sizes[1])
    done = 0
    for a, b, first, stop in ranges:
        if not whole:
            s_track = ClipTrack(source, source_motion.slice(first, stop))
        elif source_track is None or source_track.character is not source or source_track.motion is not source_motion:
            s_track = ClipTrack(source, source_motion)
        else:
            s_track = source_track
        step = (stop - first) * sizes[0] / work
        s_m = yield from scaled(measuring(s_track, _rows(source_ground, first, stop), s_kv), done, done + step)
        done += step
        s_tally.add(s_m, s_m.joint_names, source_motion.fps, a, b, first)
        truth = None if not kv else pairs_closer(s_m.keyverts[a - first:b - first], ii, jj, CONTACT_FRACTION * hs)
        # the key vertices in a source contact: its pairs, and its hands on its body (found in the same pass)
        read = None
        if kv:
            read = np.zeros((stop - first, len(s_kv)), bool)
            read[a - first:b - first] = contact_entries(truth, (ii, jj), np.zeros((b - a, len(s_kv)), bool))
        s_mm = yield from scaled(mesh_measuring(s_track, s_kv, CONTACT_FRACTION * hs, read, own_touch=True,
                                                hand_margin=np.full(stop - first, TOUCH_FRACTION * hs)), done, done)
        s_mesh.add(s_mm, a, b, first)
        s_hands.add(s_mm.hand_gap, s_mm.hand_depth, a, b, first)
        # the target's hands are read out to WIDE_FRACTION where the source's touch its body (their gap there), and
        # nowhere else
        t_margin = np.where(touching(s_mm.hand_gap, hs).any((1, 2)), WIDE_FRACTION * ht, 0.0)
        if kv:
            read[a - first:b - first] |= s_mm.hand_touch[a - first:b - first]
            s_mesh.add_contacts(read[a - first:b - first], s_mm.key_depth[a - first:b - first], a)
        for k, motion in enumerate(target_motions):
            t_track = tracks[k] if whole else None
            tracks[k] = None
            if t_track is None or t_track.character is not target or t_track.motion is not motion:
                t_track = ClipTrack(target, motion if whole else motion.slice(first, stop))
            step = (stop - first) * sizes[1] / work
            t_m = yield from scaled(measuring(t_track, 0.0 if terrain is None else terrain, t_kv), done, done + step)
            done += step
            # jerk on the core bones both characters map, so that target and source are compared joint for joint
            common = [n for n in t_m.joint_names if n in s_m.joint_names]
            t_tallies[k].add(t_m, common, motion.fps, a, b, first)
            if kv:
                contacts[k].add(truth, pairs_closer(t_m.keyverts[a - first:b - first], ii, jj,
                                                    CONTACT_FRACTION * ht))
            t_mm = yield from scaled(mesh_measuring(t_track, t_kv, CONTACT_FRACTION * ht, read,
                                                    hand_margin=t_margin), done, done)
            t_meshes[k].add(t_mm, a, b, first)
            t_hands[k].add(t_mm.hand_gap, t_mm.hand_depth, a, b, first)
            if kv:
                t_meshes[k].add_contacts(read[a - first:b - first], t_mm.key_depth[a - first:b - first], a)
            t_track = t_m = None       # freed before the next clip's track is built
        s_track = s_m = s_mm = truth = read = t_margin = None
    fitted = bool(getattr(source.mesh, "fitted", False))       # its overlaps are the fit's: no depth allowed
    if series is not None:
        series.extend({"mesh_pen": tm.share.copy(), "contact_depth": tm.contact.copy()} for tm in t_meshes)
    return [dict(_scores(s_tally, t, c, hs, ht), **mesh_scores(s_mesh, tm, ht),
                 **hand_scores(s_hands, th, hs, ht, fitted))
            for t, c, tm, th in zip(t_tallies, contacts, t_meshes, t_hands)]


#: re-exported from ``core.metrics.measures`` for callers of the per-frame measures (the partner metrics, the bench,
#: tests)
__all__ = ["CONTACT_FRACTION", "GROUNDED_FRACTION", "JERK_SPAN", "LOCKED_FRACTION", "LOCKED_STRICT_FRACTION",
           "chunk_ranges", "evaluate", "evaluation", "evaluations", "f1_counts", "f1_score", "roc_auc"]
