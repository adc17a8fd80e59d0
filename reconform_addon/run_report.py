"""A retarget's report for the batch command, the demo and the library (docs/bridge.md "Report"): the JSON of
one run (``make_report``), per-frame series for plots (``frame_series``), and ``plain`` (metrics to strict JSON)."""

from __future__ import annotations

import json

import numpy as np

from ..core.metrics import report
from ..core.metrics.measures import foot_heights
from ..core.metrics.scores import GROUNDED_FRACTION
from ..core.pipeline.retarget import Outcome
from ..core.character.track import ClipTrack


def _map_report(built) -> dict:
    character = built.character
    mapped = set(character.bone_map.values())
    return {"armature": character.name, "bones": character.skeleton.num_bones, "mapped": len(mapped),
            "rig_type": built.rig_type, "bone_map": dict(character.bone_map),
            "unmapped": [n for n in character.skeleton.names if n not in mapped],
            "mesh": character.mesh.part_names if character.mesh is not None and not built.fitted_body else None,
            "meshes_left_out": dict(built.meshes_left_out),
            "fitted_body": built.fitted_body, "keyverts": built.keyverts_origin or None,
            "height_m": character.height}


def conflict_rows(conflicts) -> list:
    """Plain dicts of core.solver.conflicts.Conflict records in their ranking (the costliest first: severity ×
    duration), as the panel lists them: body part, the two terms, worst cosine, peak severity, cost (score),
    frame spans [[first, last], ...]."""
    return [{"rank": k + 1, "body_part": c.body_part, "terms": [c.term_a, c.term_b], "cosine": c.cosine,
             "severity": c.severity, "score": c.score, "spans": [list(sp) for sp in c.spans]}
            for k, c in enumerate(conflicts)]


def ground_report(outcome: Outcome) -> dict:
    """What the target stood on: the ground object's sampling (``core.contacts.terrain.TerrainReport``), else the
    world floor."""
    if outcome.ground is not None:
        return outcome.ground.as_dict()
    if outcome.terrain is not None:
        return {"object": getattr(outcome.terrain, "name", "") or None, "floor": "height field"}
    return {"object": None, "floor": "world z = 0"}


def make_report(inputs, outcome: Outcome, action_name: str, timings: dict) -> dict:
    """The JSON-serialisable report of a retarget (docs/bridge.md); ``inputs``: the ``pipeline.Inputs`` read."""
    motion = outcome.motion
    rep = {
        "method": outcome.method,
        "source": _map_report(outcome.built["source"]), "target": _map_report(outcome.built["target"]),
        "source_action": inputs.source_action or None,
        "action": action_name,
        "frame_start": int(motion.frame_start), "frame_end": int(motion.frame_start + motion.num_frames - 1),
        "frames": int(motion.num_frames), "fps": float(motion.fps),
        "source_mesh": _map_report(outcome.built["source"])["mesh"],
        "target_mesh": _map_report(outcome.built["target"])["mesh"],
        "timings": {k: round(v, 4) for k, v in timings.items()},
        "metrics": plain(outcome.metrics), "reference_metrics": plain(outcome.reference),
        # the same metrics for people (core.metrics.report): label, unit, which way is better, copy-rotations beside
        "metrics_table": plain([r.as_dict() for r in report.metric_rows(outcome.metrics, outcome.reference)]),
        "verdict": report.verdict(outcome.metrics, outcome.reference, outcome.method),
        "conflicts": plain(conflict_rows(outcome.conflicts)),
        "ground": plain(ground_report(outcome)),
        "notes": list(inputs.notes) + list(outcome.notes),
    }
    if outcome.job is not None or "windows" in outcome.solver_stats:
        rep["metrics_solver"] = plain(outcome.solver_stats)
    weights = outcome.job.settings.part_weights if outcome.job is not None else None
    if weights:              # the per-part term factors the character was solved with, as a set-up gives them
        rep["part_weights"] = {}
        for (part, term), factor in weights.items():
            rep["part_weights"].setdefault(part, {})[term] = float(factor)
    json.dumps(rep, allow_nan=False)  # must stay strict JSON for --report
    return rep


def frame_series(outcome: Outcome) -> dict:
    """Per-frame series of a retarget for plots (the library report, docs/library.md): each foot's lowest point
    above its ground, (2, T) left/right as shares of the character's height h_c, for the source (above the floor
    the solve used; absent for a skeleton-only source under copy-rotations), copy-rotations and the result."""
    mo, src, tgt = outcome.motion, outcome.source, outcome.target
    feet = {}
    if src.mesh is not None and src.height and outcome.source_track is not None:
        feet["source"] = foot_heights(outcome.source_track, outcome.source_ground) / float(src.height)
    if tgt.mesh is not None and tgt.height:
        terrain = getattr(outcome.job, "terrain", None)
        ground = 0.0 if terrain is None else terrain
        runs = {"copy_rotations": outcome.init_motion, "result": mo} if outcome.method == "reconform" \
            else {"result": mo}
        for name, motion in runs.items():
            feet[name] = foot_heights(ClipTrack(tgt, motion), ground) / float(tgt.height)
    return {"fps": float(mo.fps), "frame_start": int(mo.frame_start), "frames": int(mo.num_frames),
            "method": outcome.method, "grounded_fraction": GROUNDED_FRACTION,
            "height_m": {"source": plain(src.height), "target": plain(tgt.height)},
            "foot_height": {k: np.round(v, 5).tolist() for k, v in feet.items()}}


def plain(value):
    """JSON-friendly copy of metrics (numpy scalars/arrays to Python; NaN and infinities to None)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray) and value.ndim > 0:
        return [plain(v) for v in value.tolist()]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        value = value.item()  # numpy / torch scalars
    if isinstance(value, float) and not np.isfinite(value):
        return None  # strict JSON: undefined metrics (e.g. no locked contacts) become null
    if isinstance(value, (str, int, float, bool)):
        return value
    return str(value)
