"""The contact depth: how deep the target's surfaces interpenetrate where the source touches itself (docs/metrics.md
"Contact depth"), read on the mesh in ``core.metrics.mesh_volume``'s pass (``mesh_measuring``, ``near_depths``), and
its scores with the mesh self-penetration's.

A **source contact** on frame t is a key-vertex pair (i, j) of the metrics' pair set within d_min in the source
(``core.metrics.scores``' contacts), or a hand key vertex of the source within d_min of the surface of a body part
that does not share a joint region with the hand (a hand on a hip, on the face). Its depth in a clip is the
deepest surface vertex within d_min of the clip's key vertex (either one of a pair): how far the surfaces there lie
inside the body's other parts. It is read on **every** vertex of the read surface near the key vertex, not on the
volume measure's probe stride (a hand sunk where no probe lies would read 0), and only on the (frame, key vertex)
entries of the source's contacts (``contact_entries``), in the same search as the volume's probes. A frame's contact
depth is the deepest of its contacts; p50 and p95 over the source's contact frames, in metres and as a share of the
target's h_c.
"""

from __future__ import annotations

import numpy as np

from .mesh_volume import MeshMeasures


def contact_entries(truth: np.ndarray, pairs, touch: np.ndarray) -> np.ndarray:
    """(F, N) bool: the key vertices in a source contact per frame, from ``truth`` (F, P) the key-vertex pairs in
    contact, ``pairs`` ((P,), (P,)) their key vertices, ``touch`` (F, N) the hand key vertices on the body."""
    ii, jj = pairs
    out = touch.copy()
    f, p = np.nonzero(truth)
    out[f, ii[p]] = True
    out[f, jj[p]] = True
    return out


class MeshTally:
    """What the mesh scores need of one clip of T frames, filled a stretch of frames at a time: the mesh
    self-penetration share (T,), and per frame the deepest of its source contacts (NaN: no source contact)."""

    def __init__(self, T: int):
        self.share = np.zeros(T)
        self.contact = np.full(T, np.nan)

    def add(self, m: MeshMeasures, a: int, b: int, first: int):
        """Clip frames a..b-1 from ``m``, the mesh measures of clip frames ``first`` onwards."""
        self.share[a:b] = m.share[a - first:b - first]

    def add_contacts(self, read: np.ndarray, depth: np.ndarray, a: int):
        """The contact depths of clip frames a.. : ``read`` (F, N) the key vertices in a source contact
        (``contact_entries``), ``depth`` (F, N) this clip's depth around each key vertex (metres; key vertices in
        the source's order)."""
        deep = np.where(read, depth, -np.inf).max(1, initial=-np.inf)
        self.contact[a:a + len(depth)] = np.where(np.isfinite(deep), deep, np.nan)


def mesh_scores(source: MeshTally, target: MeshTally, target_height: float) -> dict:
    """The mesh keys of docs/metrics.md from the source's and the target's tallies (the target's h_c)."""
    out = {}
    for name, tr in (("", target), ("source_", source)):
        out[name + "mesh_pen_mean"] = float(tr.share.mean()) if tr.share.size else float("nan")
        out[name + "mesh_pen_max"] = float(tr.share.max()) if tr.share.size else float("nan")
    c = target.contact[np.isfinite(target.contact)]
    out["source_contact_frames"] = float(len(c))
    for q in (50, 95):
        v = float(np.percentile(c, q)) if len(c) else float("nan")
        out[f"contact_depth_p{q}"] = v
        out[f"contact_depth_p{q}_height"] = v / target_height
    s = source.contact[np.isfinite(source.contact)]
    out["source_contact_depth_p95"] = float(np.percentile(s, 95)) if len(s) else float("nan")
    return out


__all__ = ["MeshTally", "contact_entries", "mesh_scores"]
