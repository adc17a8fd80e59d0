"""The batch set-up file (docs/bridge.md "Set-up file"): bone maps per character, settings, key-vertex count,
ground, windows, several characters; read once and turned into the core's options. Used by ``pipeline`` and
``pipeline_group`` (the batch command, the demo, the bench)."""

from __future__ import annotations

import json
import os

from ..core.solver.conflicts import merge_part_weights
from ..core.errors import CoreError
from ..core.pipeline.retarget import RetargetOptions
from ..core.solver import SolverSettings
from ..core.solver.settings import part_weights_from
from ..core.pipeline.windows import WindowPlan
from .bridge import BridgeError, import_file
from .bridge import terrain as ground_bridge
from .bridge.io import SUPPORTED


def load_setup(path) -> dict:
    """Read a JSON set-up file (bone maps per character and settings; see docs/bridge.md)."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            setup = json.load(f)
    except FileNotFoundError:
        raise BridgeError(f"Cannot read set-up '{path}': file not found.") from None
    except (OSError, ValueError) as ex:
        raise BridgeError(f"Cannot read set-up '{path}': {ex}") from None
    if not isinstance(setup, dict):
        raise BridgeError(f"Set-up '{path}' must be a JSON object.")
    base = os.path.dirname(os.path.abspath(path))
    for role in ("source", "target"):
        entry = setup.get(role)
        if isinstance(entry, dict) and entry.get("bone_map_file"):
            entry["bone_map_file"] = os.path.join(base, entry["bone_map_file"])
    if isinstance(setup.get("ground"), dict) and setup["ground"].get("file"):
        setup["ground"]["file"] = os.path.join(base, setup["ground"]["file"])
    chars = setup.get("characters")
    if chars is not None and not (isinstance(chars, list) and all(isinstance(c, dict) for c in chars)):
        raise BridgeError(f"Set-up '{path}': 'characters' must be a list of objects with 'source' and 'target'.")
    for c in chars or ():   # several characters retargeted together (pipeline_group); files relative to the set-up
        for key in ("source", "target"):
            spec = c.get(key)
            if isinstance(spec, str) and os.path.splitext(spec)[1].lower() in SUPPORTED and not os.path.isabs(spec):
                c[key] = os.path.join(base, spec)
        for key in ("source_bone_map", "target_bone_map"):
            entry = c.get(key)
            if isinstance(entry, dict) and entry.get("bone_map_file"):
                entry["bone_map_file"] = os.path.join(base, entry["bone_map_file"])
    return setup


def setup_bone_map(setup: dict, role: str, arm_name: str):
    """The bone map the set-up gives for ``role`` ('source'|'target') or armature ``arm_name``, or None.

    Looked up in this order: ``setup[role]["bone_map"]``, ``setup[role]["bone_map_file"]`` (a preset JSON
    saved by core.bonemap), ``setup[role]["preset"]`` (a built-in preset name), ``setup["bone_maps"][arm_name]``.
    """
    if not setup:
        return None
    entry = setup.get(role) or {}
    if not isinstance(entry, dict):
        raise BridgeError(f"Set-up entry '{role}' must be an object with 'bone_map', 'bone_map_file' or 'preset'.")
    from ..core import bonemap
    if entry.get("bone_map") is not None:
        return dict(entry["bone_map"])
    if entry.get("bone_map_file"):
        return dict(bonemap.load_bone_map(entry["bone_map_file"])[0])
    if entry.get("preset"):
        return dict(bonemap.load_preset(entry["preset"])[0])
    by_name = setup.get("bone_maps") or {}
    if arm_name in by_name:
        return dict(by_name[arm_name])
    return None


def setup_ground(setup: dict) -> dict:
    """The set-up's ground as {'object': name or None, 'file': path or None, 'spacing': m or None,
    'ceiling': z or None}: ``"ground": "Stairs"`` or ``"ground": {"object": ..., "file": ..., ...}``."""
    entry = (setup or {}).get("ground")
    if entry is None:
        return {}
    if isinstance(entry, str):
        entry = {"object": entry}
    if not isinstance(entry, dict):
        raise BridgeError("Set-up entry 'ground' must be an object name or {\"object\": ..., \"file\": ...}.")
    unknown = set(entry) - {"object", "file", "spacing", "ceiling"}
    if unknown:
        raise BridgeError(f"Set-up entry 'ground': unknown key(s) {', '.join(sorted(unknown))} (use object, file, "
                          "spacing, ceiling).")
    for key in ("spacing", "ceiling"):
        if entry.get(key) is not None and not isinstance(entry[key], (int, float)):
            raise BridgeError(f"Set-up entry 'ground': '{key}' must be a number of metres.")
    return dict(entry)


def setup_window(setup: dict):
    """The set-up's windows (a long clip retargeted as overlapping windows, ``core.pipeline.windows``) as a WindowPlan, or
    None: ``"window": 300`` (frames; a fifth of it shared at each seam) or ``"window": {"frames": 300,
    "overlap": 60}``."""
    entry = (setup or {}).get("window")
    if entry is None or entry is False or entry == 0:
        return None
    if isinstance(entry, bool) or not isinstance(entry, (int, dict)):
        raise BridgeError("Set-up entry 'window' must be a number of frames or {\"frames\": ..., \"overlap\": ...}.")
    entry = {"frames": entry} if isinstance(entry, int) else dict(entry)
    unknown = set(entry) - {"frames", "overlap"}
    if unknown or not isinstance(entry.get("frames"), int) or not isinstance(entry.get("overlap", 0), int):
        raise BridgeError("Set-up entry 'window': give whole numbers of frames as {\"frames\": 300, \"overlap\": 60}"
                          + (f" (unknown key(s) {', '.join(sorted(unknown))})" if unknown else "") + ".")
    plan = WindowPlan(entry["frames"], entry.get("overlap") or max(2, entry["frames"] // 5))
    try:
        plan.check()
    except CoreError as ex:
        raise BridgeError(f"Set-up entry 'window': {ex}") from None
    return plan


def resolve_ground(entry: dict, report=None):
    """The ground object of a ``setup_ground`` entry: imported from ``entry['file']`` when given (then named by
    ``entry['object']``, or the file's only mesh), else the object ``entry['object']`` of the open file."""
    objects = None
    if entry.get("file"):
        (report or (lambda msg: None))(f"importing ground '{entry['file']}'")
        objects = import_file(entry["file"], report=report or (lambda msg: None))
    elif not entry.get("object"):
        return None
    return ground_bridge.find_ground(entry.get("object"), objects)


def character_part_weights(entry: dict, index: int):
    """The checked per-part term factors {(part, term): factor} of a set-up's ``characters`` entry number ``index``
    (0-based; ``"part_weights": {part: {term: factor}}``), or None where it gives none."""
    if not entry.get("part_weights"):
        return None
    try:
        return part_weights_from(entry["part_weights"])
    except (CoreError, AttributeError, TypeError) as ex:
        detail = str(ex) if isinstance(ex, CoreError) else "give {\"part\": {\"term\": factor}}"
        raise BridgeError(f"Set-up 'characters' entry {index + 1} ('{entry.get('target')}'): {detail}") from None


def merged_part_weights(shared, own: dict) -> dict:
    """A set-up's settings' ``part_weights`` (either form, checked) with a character's own ``own`` {(part, term):
    factor} multiplied in (``core.solver.conflicts.merge_part_weights``)."""
    try:
        return merge_part_weights(part_weights_from(shared), own)
    except CoreError as ex:
        raise BridgeError(f"Solver settings: {ex}") from None


def solver_settings(settings) -> SolverSettings:
    """SolverSettings from None, a SolverSettings, or a dict of its fields plus 'quality' (a preset name)."""
    if settings is None:
        return SolverSettings()
    if isinstance(settings, SolverSettings):
        return settings
    settings = dict(settings)
    quality = settings.pop("quality", "balanced")
    try:
        if "part_weights" in settings:      # {body part: {term: factor}} in a set-up file
            settings["part_weights"] = part_weights_from(settings["part_weights"])
        return SolverSettings.preset(quality, **settings)
    except TypeError as ex:
        raise BridgeError(f"Solver settings: {ex}; see docs/bridge.md for the accepted names.") from None
    except CoreError as ex:
        raise BridgeError(f"Solver settings: {ex}") from None


def setup_options(method: str, settings, setup: dict) -> RetargetOptions:
    """The RetargetOptions of a batch, demo or bench retarget: ``settings`` (a dict or SolverSettings; default the
    set-up's ``"settings"``) for 'reconform', the set-up's ``keyvert_count`` (41 by default) and
    ``baseline_metrics`` (true by default: copy-rotations measured beside the result)."""
    if settings is None and setup.get("settings"):
        settings = dict(setup["settings"])
    baseline = setup.get("baseline_metrics", True)
    if not isinstance(baseline, bool):
        raise BridgeError(f"Set-up entry 'baseline_metrics' must be true or false, not {baseline!r}.")
    return RetargetOptions(method=method, keyvert_count=int(setup.get("keyvert_count", 41)),
                           settings=solver_settings(settings) if method == "reconform" else SolverSettings(),
                           baseline_metrics=baseline)
