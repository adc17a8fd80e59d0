"""Advice on a finished retarget that the panel can show without torch (this module imports numpy only).

``floor_advice`` reads the metrics of a solve and says when the source's floor (``SolverSettings.source_ground``,
``core.contacts.ground``) should be read another way.
"""

from __future__ import annotations

#: ``floor_advice``: the source's own feet kept on its floor score a grounded F1 below this against its labels
SINKING_F1 = 0.9
#: ``floor_advice``: the source's feet are grounded on fewer than this share of its foot-frames
FLOATING_SHARE = 0.02


def floor_advice(metrics: dict) -> str | None:
    """One line of advice on the source's floor from ``core.metrics.scores.evaluate`` output, or None.

    The grounded labels of the source are read above its floor (``source_ground``). If the source's own feet,
    lifted to that floor where they sink under it, score a grounded F1 below ``SINKING_F1`` against those
    labels (``source_grounded_f1_clamped``), its feet go under the floor on many frames: the grounded F1 of any
    target that stays on its floor is capped there, and a tracked or estimated floor usually suits the clip
    better. If its feet are grounded on fewer than ``FLOATING_SHARE`` of its foot-frames, it may float.
    """
    def value(key):
        v = metrics.get(key)
        return None if v is None or v != v else float(v)

    f1, share = value("source_grounded_f1_clamped"), value("source_grounded_share")
    if f1 is not None and f1 < SINKING_F1:
        return (f"The source's feet sink under its floor on many frames (kept on the floor they would score "
                f"grounded F1 {f1:.2f} against the source): try Source Floor 'Track Drift' or 'Estimate Level' "
                f"(source_ground 'track' / 'estimate').")
    if share is not None and share < FLOATING_SHARE:
        return (f"The source's feet touch its floor on {100 * share:.0f} % of the frames: if the clip floats, "
                f"try Source Floor 'Estimate Level' (source_ground 'estimate').")
    return None
