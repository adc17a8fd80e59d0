"""Bone-map presets: versioned JSON files (``SCHEMA``/``VERSION``), validation, and fitting a preset to a
skeleton (docs/bone_mapping.md). Built-in presets live in ``core/bonemap/presets``.
"""

from __future__ import annotations

import json
import os

from ..errors import CoreError
from ..rig.humanoid import CANONICAL_BONES, REQUIRED_BONES
from ..types import Skeleton
from .detect import BoneMapResult
from .names import _NAMESPACE

SCHEMA = "reconform.bone_map"
VERSION = 1
PRESET_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "presets")


def validate_bone_map(bone_map: dict, skeleton: Skeleton = None, what: str = "bone map") -> dict:
    """Check a bone map's shape (canonical keys, string values, no bone used twice, bones exist).

    Returns the map as a plain dict; raises CoreError naming the first problem.
    """
    if not isinstance(bone_map, dict):
        raise CoreError(f"{what}: expected an object {{canonical name: bone name}}, got {type(bone_map).__name__}.")
    seen = {}
    for k, v in bone_map.items():
        if k not in CANONICAL_BONES:
            raise CoreError(f"{what}: '{k}' is not a canonical humanoid bone (see docs/bone_mapping.md).")
        if not isinstance(v, str) or not v:
            raise CoreError(f"{what}: the bone for '{k}' must be a non-empty string.")
        if v in seen:
            raise CoreError(f"{what}: bone '{v}' is mapped twice ('{seen[v]}' and '{k}').")
        seen[v] = k
        if skeleton is not None and v not in skeleton.names:
            raise CoreError(f"{what}: armature '{skeleton.name}' has no bone '{v}' (mapped to '{k}').")
    return dict(bone_map)


def save_bone_map(path, bone_map: dict, rig_type: str = "custom") -> None:
    """Write a bone-map preset (JSON, schema ``reconform.bone_map`` version 1)."""
    validate_bone_map(bone_map, what=f"Bone map for '{path}'")
    ordered = {c: bone_map[c] for c in CANONICAL_BONES if c in bone_map}
    data = {"schema": SCHEMA, "version": VERSION, "rig_type": str(rig_type), "bone_map": ordered}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)


def load_bone_map(path):
    """Read a bone-map preset. Returns ``(bone_map, rig_type)``; raises CoreError with the reason."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as ex:
        raise CoreError(f"Bone-map preset '{path}' cannot be read: {ex.strerror}.") from None
    except json.JSONDecodeError as ex:
        raise CoreError(f"Bone-map preset '{path}' is not valid JSON (line {ex.lineno}): {ex.msg}.") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise CoreError(f"'{path}' is not a bone-map preset (expected \"schema\": \"{SCHEMA}\").")
    ver = data.get("version")
    if not isinstance(ver, int) or ver < 1 or ver > VERSION:
        raise CoreError(f"Bone-map preset '{path}' has version {ver!r}; this version reads 1..{VERSION}: "
                        f"update the add-on.")
    if "bone_map" not in data:
        raise CoreError(f"Bone-map preset '{path}' has no \"bone_map\".")
    bone_map = validate_bone_map(data["bone_map"], what=f"Bone-map preset '{path}'")
    return bone_map, str(data.get("rig_type", "custom"))


def list_presets() -> list:
    """Names of the built-in presets (file stems in ``core/bonemap/presets``)."""
    if not os.path.isdir(PRESET_DIR):
        return []
    return sorted(f[:-5] for f in os.listdir(PRESET_DIR) if f.endswith(".json"))


def load_preset(name: str):
    """A built-in preset by name: ``(bone_map, rig_type)``."""
    path = os.path.join(PRESET_DIR, f"{name}.json")
    if not os.path.isfile(path):
        raise CoreError(f"No built-in bone-map preset '{name}'; available: {', '.join(list_presets())}.")
    return load_bone_map(path)


def apply_bone_map(skeleton: Skeleton, bone_map: dict) -> BoneMapResult:
    """Fit a (preset) bone map to a skeleton: bones are matched exactly, else ignoring namespaces
    (``mixamorig:`` vs ``mixamorig1:``) and case. Canonical bones whose bone is absent are dropped."""
    validate_bone_map(bone_map)
    exact = set(skeleton.names)
    loose = {}
    for n in skeleton.names:
        loose.setdefault(_NAMESPACE.sub("", n).lower(), n)
    out = {}
    for c, b in bone_map.items():
        if b in exact:
            out[c] = b
        elif _NAMESPACE.sub("", b).lower() in loose:
            out[c] = loose[_NAMESPACE.sub("", b).lower()]
    used = set(out.values())
    return BoneMapResult(out, [n for n in skeleton.names if n not in used], "preset",
                         [c for c in REQUIRED_BONES if c not in out])


__all__ = ["PRESET_DIR", "SCHEMA", "VERSION", "apply_bone_map", "list_presets", "load_bone_map", "load_preset",
           "save_bone_map", "validate_bone_map"]
