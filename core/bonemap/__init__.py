"""Automatic humanoid bone mapping (names + topology) and JSON bone-map presets (docs/bone_mapping.md).

A bone map is ``{canonical name: bone name}`` with canonical names from ``core.rig.humanoid``; ReConForM assumes it
given (ReConForM §3). Modules: ``names`` (bone-name analysis and the word tables), ``detect``
(``detect_bone_map``: names, then the tree and the rest pose), ``presets`` (versioned JSON presets, validation,
``apply_bone_map``; built-in presets in ``core/bonemap/presets``).
"""

from ..rig.humanoid import CORE_BONES, FINGERS
from .detect import BoneMapResult, detect_bone_map
from .names import NameInfo, analyse_name
from .presets import (PRESET_DIR, SCHEMA, VERSION, apply_bone_map, list_presets, load_bone_map, load_preset,
                      save_bone_map, validate_bone_map)

__all__ = ["BoneMapResult", "CORE_BONES", "FINGERS", "NameInfo", "PRESET_DIR", "SCHEMA", "VERSION", "analyse_name",
           "apply_bone_map", "detect_bone_map", "list_presets", "load_bone_map", "load_preset", "save_bone_map",
           "validate_bone_map"]
