"""The metrics of a retarget (``core.metrics.scores.evaluate``) as a reader sees them: each metric's name, unit, which way
is better and how it is printed; the result beside copy-rotations; a one-line verdict per target.

One place for the batch command's text and JSON reports (tools/retarget.py, ``run_report.make_report``), the demo's
report.txt (tools/demo.py) and the panel's Metrics sub-panel. Imports numpy only: the panel draws with it and
never imports torch. Definitions of the metrics: docs/metrics.md.

    rows = metric_rows(metrics, reference)          # [Row], the headline metrics first
    line = verdict(metrics, reference, "reconform")  # one line for the target
"""

from __future__ import annotations

import math
from typing import NamedTuple

LOWER, HIGHER = "lower", "higher"
#: a contact score (F1, a contact kept) below this, where the source has contacts, reads "lost", whatever
#: copy-rotations scores: a contact the result does not hold is not "better" for being held less rarely still
LOST_BELOW = 0.1


class MetricInfo(NamedTuple):
    """How one metric reads.

    key: the key in ``core.metrics.scores.evaluate``'s dict; label: its name for people; unit: printed after the value
    ('' for a unitless score); better: LOWER, HIGHER or '' (a description of the clip, no direction);
    scale: printed value = value × scale (shares are printed in %); decimals: digits after the point;
    headline: in the short table and the verdict.
    noise: a change reads "better" or "worse" only beyond max(noise, noise_rel × |copy-rotations' value|), in the
    metric's own units (before ``scale``); within it, "same". contact: a contact score (``LOST_BELOW``).
    """

    key: str
    label: str
    unit: str
    better: str
    scale: float = 1.0
    decimals: int = 3
    headline: bool = False
    noise: float = 0.01
    noise_rel: float = 0.0
    contact: bool = False


_PCT_SURFACE = "% of the surface"
_PCT_VOLUME = "% of the body volume"
_PCT_SOURCE = "% of the source's"
METRICS = (
    MetricInfo("grounded_f1", "Grounded feet F1", "", HIGHER, headline=True),
    MetricInfo("locked_f1", "Feet locked F1", "", HIGHER, headline=True),
    MetricInfo("contact_f1", "Key-vertex contacts F1", "", HIGHER, headline=True, contact=True),
    MetricInfo("floor_pen_mean", "Floor penetration, mean", _PCT_SURFACE, LOWER, 100.0, 2, True,
               noise=1e-4, noise_rel=0.05),
    MetricInfo("floor_pen_max", "Floor penetration, worst frame", _PCT_SURFACE, LOWER, 100.0, 2, True,
               noise=1e-4, noise_rel=0.05),
    MetricInfo("self_pen_mean", "Self-penetration, mean", _PCT_SURFACE, LOWER, 100.0, 2, True,
               noise=1e-4, noise_rel=0.05),
    MetricInfo("self_pen_max", "Self-penetration, worst frame", _PCT_SURFACE, LOWER, 100.0, 2, noise=1e-4,
               noise_rel=0.05),
    MetricInfo("jerk_mean", "Jerk of the joints, mean", "m/s³", LOWER, 1.0, 0, True, noise=1.0, noise_rel=0.03),
    MetricInfo("jerk_max", "Jerk of the joints, max", "m/s³", LOWER, 1.0, 0, noise=1.0, noise_rel=0.03),
    MetricInfo("root_jerk_mean", "Jerk of the root, mean", "m/s³", LOWER, 1.0, 0, noise=1.0, noise_rel=0.03),
    MetricInfo("root_jerk_max", "Jerk of the root, max", "m/s³", LOWER, 1.0, 0, noise=1.0, noise_rel=0.03),
    # how far the solve turned the head from copy-rotations': a description, no better side
    MetricInfo("head_turn_mean", "Head turned from copy-rotations', mean", "°", "", 1.0, 1),
    MetricInfo("head_turn_max", "Head turned from copy-rotations', worst frame", "°", "", 1.0, 1),
    # on the mesh itself (core.metrics.mesh_volume, core.metrics.contact_depth)
    MetricInfo("mesh_pen_mean", "Mesh self-penetration, mean", _PCT_VOLUME, LOWER, 100.0, 3, True, noise=2e-5,
               noise_rel=0.05),
    MetricInfo("mesh_pen_max", "Mesh self-penetration, worst frame", _PCT_VOLUME, LOWER, 100.0, 3, noise=2e-5,
               noise_rel=0.05),
    MetricInfo("contact_depth_p50", "Contact depth, median", "mm", LOWER, 1000.0, 1, noise=5e-4, noise_rel=0.05),
    MetricInfo("contact_depth_p95", "Contact depth, 95th percentile", "mm", LOWER, 1000.0, 1, True, noise=5e-4,
               noise_rel=0.05),
    MetricInfo("contact_depth_p50_height", "Contact depth, median", "% of h", LOWER, 100.0, 2, noise=3e-4,
               noise_rel=0.05),
    MetricInfo("contact_depth_p95_height", "Contact depth, 95th percentile", "% of h", LOWER, 100.0, 2,
               noise=3e-4, noise_rel=0.05),
    # a hand on the body in the source, on the same region's skin in the target (core.metrics.hand_contacts)
    MetricInfo("hand_contact_held", "Hand contacts held on the skin", _PCT_SOURCE, HIGHER, 100.0, 0, True,
               noise=0.02, contact=True),
    MetricInfo("hand_contact_sunk", "Hand contacts sunk into the body", _PCT_SOURCE, LOWER, 100.0, 0, noise=0.02),
    MetricInfo("hand_contact_gap_p50", "Hand contact gap, median", "mm", LOWER, 1000.0, 1, noise=5e-4,
               noise_rel=0.05),
    MetricInfo("hand_contact_gap_p95", "Hand contact gap, 95th percentile", "mm", LOWER, 1000.0, 1, noise=5e-4,
               noise_rel=0.05),
    MetricInfo("hand_contact_gap_p50_height", "Hand contact gap, median", "% of h", LOWER, 100.0, 2, noise=3e-4,
               noise_rel=0.05),
    MetricInfo("hand_contact_gap_p95_height", "Hand contact gap, 95th percentile", "% of h", LOWER, 100.0, 2,
               noise=3e-4, noise_rel=0.05),
    MetricInfo("grounded_auc", "Grounded feet ROC AUC", "", HIGHER),
    MetricInfo("locked_auc", "Feet locked ROC AUC", "", HIGHER),
    MetricInfo("locked_strict_f1", "Feet locked F1 (paper's 0.1 % h/s)", "", HIGHER),
    MetricInfo("locked_strict_auc", "Feet locked ROC AUC (paper's 0.1 % h/s)", "", HIGHER),
    MetricInfo("contact_precision", "Key-vertex contacts precision", "", HIGHER),
    MetricInfo("contact_recall", "Key-vertex contacts recall", "", HIGHER),
    MetricInfo("frames", "Frames measured", "frames", "", 1.0, 0),
    MetricInfo("source_jerk_mean", "Source: jerk of the joints, mean", "m/s³", "", 1.0, 0),
    MetricInfo("source_jerk_max", "Source: jerk of the joints, max", "m/s³", "", 1.0, 0),
    MetricInfo("source_root_jerk_mean", "Source: jerk of the root, mean", "m/s³", "", 1.0, 0),
    MetricInfo("source_root_jerk_max", "Source: jerk of the root, max", "m/s³", "", 1.0, 0),
    MetricInfo("source_floor_pen_mean", "Source: floor penetration, mean", _PCT_SURFACE, "", 100.0, 2),
    MetricInfo("source_floor_pen_max", "Source: floor penetration, worst frame", _PCT_SURFACE, "", 100.0, 2),
    MetricInfo("source_self_pen_mean", "Source: self-penetration, mean", _PCT_SURFACE, "", 100.0, 2),
    MetricInfo("source_self_pen_max", "Source: self-penetration, worst frame", _PCT_SURFACE, "", 100.0, 2),
    MetricInfo("source_grounded_share", "Source: feet grounded", "% of foot-frames", "", 100.0, 1),
    MetricInfo("source_locked_share", "Source: feet locked", "% of foot-frames", "", 100.0, 1),
    MetricInfo("source_locked_strict_share", "Source: feet locked (paper's 0.1 % h/s)", "% of foot-frames", "",
               100.0, 1),
    MetricInfo("source_grounded_f1_clamped", "Source: grounded F1, feet kept on its floor", "", ""),
    MetricInfo("source_contacts", "Source: key-vertex contacts", "pair-frames", "", 1.0, 0),
    MetricInfo("source_mesh_pen_mean", "Source: mesh self-penetration, mean", _PCT_VOLUME, "", 100.0, 3),
    MetricInfo("source_mesh_pen_max", "Source: mesh self-penetration, worst frame", _PCT_VOLUME, "", 100.0, 3),
    MetricInfo("source_contact_frames", "Source: frames with a self-contact", "frames", "", 1.0, 0),
    MetricInfo("source_contact_depth_p95", "Source: its own contact depth, 95th percentile", "mm", "", 1000.0, 1),
    MetricInfo("source_hand_contacts", "Source: hand contacts on the body", "hand-region-frames", "", 1.0, 0),
    # several characters retargeted together (core.metrics.partners, docs/metrics.md)
    MetricInfo("partner_contact_f1", "Contacts with partners F1", "", HIGHER, headline=True, contact=True),
    MetricInfo("partner_contact_precision", "Contacts with partners precision", "", HIGHER),
    MetricInfo("partner_contact_recall", "Contacts with partners recall", "", HIGHER),
    MetricInfo("hand_partner_error_mean", "Hand-to-partner distance error, mean", "% of h", LOWER, 100.0, 2,
               True, noise=5e-4, noise_rel=0.05),
    MetricInfo("hand_partner_error_p90", "Hand-to-partner distance error, 90th percentile", "% of h", LOWER,
               100.0, 2, noise=5e-4, noise_rel=0.05),
    MetricInfo("partner_pen_mean", "Penetration between characters, mean", _PCT_SURFACE, LOWER, 100.0, 2, True,
               noise=1e-4, noise_rel=0.05),
    MetricInfo("partner_pen_max", "Penetration between characters, worst frame", _PCT_SURFACE, LOWER, 100.0, 2,
               noise=1e-4, noise_rel=0.05),
    MetricInfo("gaze_angle_error_mean", "Gaze angle error, mean", "°", LOWER, 1.0, 1, True, noise=1.0,
               noise_rel=0.05),
    MetricInfo("source_partner_contacts", "Source: contacts with partners", "pair-frames", "", 1.0, 0),
    MetricInfo("source_hand_partner_entries", "Source: hand-to-partner contacts", "entries", "", 1.0, 0),
    MetricInfo("source_partner_pen_mean", "Source: penetration between characters, mean", _PCT_SURFACE, "",
               100.0, 2),
    MetricInfo("source_partner_pen_max", "Source: penetration between characters, worst frame", _PCT_SURFACE, "",
               100.0, 2),
    MetricInfo("source_gaze_angle_mean", "Source: gaze angle to the partner, mean", "°", "", 1.0, 1),
    MetricInfo("source_gaze_frames", "Source: gaze frames", "frames", "", 1.0, 0),
)
BY_KEY = {m.key: m for m in METRICS}
METHOD_LABELS = {"reconform": "ReConForM", "copy_rotations": "Copy Rotations"}


#: the key prefix of ``metrics_partners``' contacts kept by pair of limbs (defined here: this module stays torch-free)
KEPT_PREFIX = "partner_kept: "


def info(key: str) -> MetricInfo:
    """The MetricInfo of ``key``; 'Hero: grounded_f1' (one target of several retargeted together) reads as
    'Hero: Grounded feet F1'; a key this module does not know reads as itself, with no unit or direction."""
    if key.startswith(KEPT_PREFIX):
        return MetricInfo(key, f"Contact kept: {key[len(KEPT_PREFIX):]}", "% of the source's frames", HIGHER, 100.0,
                          0, noise=0.02, contact=True)
    if ": " in key:
        who, _, rest = key.partition(": ")
        m = info(rest)
        return m._replace(key=key, label=f"{who}: {m.label}")
    return BY_KEY.get(key) or MetricInfo(key, key.replace("_", " ").capitalize(), "", "", 1.0, 3)


def _number(value):
    """``value`` as a finite float, or None (missing, NaN, infinite or not a number)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def format_value(key: str, value, unit: bool = True, short: bool = False) -> str:
    """'1.25 % of the surface' ('1.25 %' when ``short``, where space is tight), '212 m/s³', '0.931'; 'n/a' for a
    metric that is undefined for this clip."""
    m = info(key)
    v = _number(value)
    if v is None:
        return "n/a"
    text = f"{v * m.scale:.{m.decimals}f}"
    if text.startswith("-") and float(text) == 0.0:
        text = text[1:]
    shown = "%" if short and m.unit.startswith("%") else m.unit
    return f"{text} {shown}" if unit and shown else text


def compare(key: str, value, reference):
    """'better', 'worse' or 'same' for ``value`` against ``reference``, or None when either is undefined or the
    metric has no better side. 'same' within the metric's noise margin (``MetricInfo.noise``, ``noise_rel``) or
    when equal once rounded as printed; 'lost' for a contact score under ``LOST_BELOW``, whatever the reference."""
    m = info(key)
    v, r = _number(value), _number(reference)
    if v is None or r is None or not m.better:
        return None
    if m.contact and v < LOST_BELOW:
        return "lost"
    if format_value(key, v, unit=False) == format_value(key, r, unit=False) or \
            abs(v - r) <= max(m.noise, m.noise_rel * abs(r)):
        return "same"
    return "better" if (v < r) == (m.better == LOWER) else "worse"


class Row(NamedTuple):
    """One line of a metrics table: its MetricInfo, the value and the copy-rotations value (floats or None), both
    printed, and ``change`` = compare(...) (None without a reference)."""

    info: MetricInfo
    value: float
    reference: float
    text: str
    reference_text: str
    change: str

    def as_dict(self) -> dict:
        """JSON-friendly form (the batch report's ``metrics_table``)."""
        return {"key": self.info.key, "label": self.info.label, "unit": self.info.unit,
                "better": self.info.better or None, "value": self.value, "copy_rotations": self.reference,
                "text": self.text, "copy_rotations_text": self.reference_text or None, "change": self.change}


def metric_rows(metrics: dict, reference: dict = None, headline_only: bool = False) -> list:
    """Rows of the metrics present in ``metrics``, in METRICS order (keys it does not know last, by name)."""
    metrics = metrics or {}
    keys = [m.key for m in METRICS if m.key in metrics and (m.headline or not headline_only)]
    if not headline_only:
        keys += sorted(k for k in metrics if k not in BY_KEY)
    rows = []
    for k in keys:
        # a description of the clip (the source's own values, the frame count) is the same for both: shown once
        has_ref = reference is not None and k in reference and bool(info(k).better)
        ref = _number(reference[k]) if has_ref else None
        rows.append(Row(info(k), _number(metrics[k]), ref, format_value(k, metrics[k]),
                        format_value(k, reference[k]) if has_ref else "",
                        compare(k, metrics[k], reference[k]) if has_ref else None))
    return rows


def _change_text(row: Row) -> str:
    """'floor penetration, mean 0.54 → 0.00 % of the surface' (the unit once)."""
    label = row.info.label[:1].lower() + row.info.label[1:]
    before = format_value(row.info.key, row.reference, unit=False)
    return f"{label} {before} → {row.text}"


def verdict(metrics: dict, reference: dict = None, method: str = "reconform") -> str:
    """One line saying how the result reads: for a solve, on how many headline metrics it beats copy-rotations and
    the three largest changes each way ("…" where there are more); for copy-rotations alone, its contact scores."""
    if not metrics:
        return "No metrics: both characters need a body (a mesh) to be measured."
    rows = [r for r in metric_rows(metrics, reference, headline_only=True)]
    if method == "copy_rotations" or not reference:
        name = METHOD_LABELS.get(method, method)
        shown = [r for r in rows if r.info.key in ("grounded_f1", "locked_f1", "floor_pen_mean")]
        parts = [f"{r.info.label} {r.text}" for r in shown]
        tail = "; ReConForM's solve is what keeps contacts" if method == "copy_rotations" else ""
        return f"{name}: " + ", ".join(parts) + tail + "." if parts else f"{name}: no comparable metric."
    better = [r for r in rows if r.change == "better"]
    worse = [r for r in rows if r.change == "worse"]
    lost = [r for r in rows if r.change == "lost"]
    compared = [r for r in rows if r.change is not None]
    if not compared:
        return "No metric could be compared with copy-rotations (undefined for this clip)."

    def size(r):   # relative change, so that '% of the surface' and F1 rank together
        return abs(r.value - r.reference) / max(abs(r.reference), abs(r.value), 1e-12)
    head = (f"{METHOD_LABELS.get(method, method)} beats copy-rotations on {len(better)} of {len(compared)} "
            f"measures")

    def largest(rs):       # the three largest changes, "…" where there are more
        return ", ".join([_change_text(r) for r in sorted(rs, key=size, reverse=True)[:3]] + ["…"] * (len(rs) > 3))
    if better:
        head += " (" + largest(better) + ")"
    if worse:
        head += "; worse on " + largest(worse)
    if lost:
        head += "; lost: " + ", ".join(f"{r.info.label[:1].lower() + r.info.label[1:]} {r.text}" for r in lost)
    return head + "."


#: the lines a person reads first (``summary_lines``): a topic and its metrics, in this order
SUMMARY = (
    ("Contacts", ("contact_f1", "hand_contact_held", "partner_contact_f1", "hand_partner_error_mean")),
    ("Through the body", ("mesh_pen_mean", "contact_depth_p95")),
    ("Feet", ("grounded_f1", "locked_f1")),
    ("Floor", ("floor_pen_mean",)),
    ("Smoothness", ("jerk_mean",)),
    ("Partners", ("partner_pen_mean", "gaze_angle_error_mean")),
)


def summary_lines(metrics: dict, reference: dict = None) -> list:
    """At most 6 lines a person reads before the full table, one per topic of ``SUMMARY`` the metrics have:
    'Feet: grounded feet F1 0.930 (copy-rotations 0.800: better), feet locked F1 …'."""
    metrics = metrics or {}
    lines = []
    for topic, keys in SUMMARY:
        parts = []
        for k in keys:
            if _number(metrics.get(k)) is None:
                continue
            label = info(k).label[:1].lower() + info(k).label[1:]
            text = f"{label} {format_value(k, metrics[k])}"
            if reference is not None and _number(reference.get(k)) is not None:
                change = compare(k, metrics[k], reference[k])
                text += f" (copy-rotations {format_value(k, reference[k], short=True)}" + \
                    (f": {change})" if change else ")")
            parts.append(text)
        if parts:
            lines.append(f"{topic}: " + ", ".join(parts))
    return lines[:6]


def text_table(metrics: dict, reference: dict = None, method: str = "reconform", indent: str = "  ",
               headline_only: bool = False) -> list:
    """Aligned plain-text lines: metric, the result, copy-rotations' value and which is better (better, worse,
    same within the metric's noise, lost); the full table is led by ``summary_lines`` and a blank line."""
    rows = metric_rows(metrics, reference, headline_only)
    if not rows:
        return [indent + "(no metrics)"]
    has_ref = any(r.reference_text for r in rows)
    head = [("metric", METHOD_LABELS.get(method, method)) + (("copy-rotations", "") if has_ref else ())]
    body = [(r.info.label, r.text) + ((r.reference_text, r.change or "") if has_ref else ()) for r in rows]
    cols = list(zip(*(head + body)))
    widths = [max(len(c) for c in col) for col in cols]
    table = [indent + "  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in head + body]
    lead = [] if headline_only else [indent + line for line in summary_lines(metrics, reference)]
    return lead + ([""] if lead else []) + table


__all__ = ["HIGHER", "KEPT_PREFIX", "LOST_BELOW", "LOWER", "METHOD_LABELS", "METRICS", "MetricInfo", "Row", "SUMMARY",
           "compare", "format_value", "info", "metric_rows", "summary_lines", "text_table", "verdict"]
