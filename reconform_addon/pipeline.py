"""bpy-side orchestration shared by the batch command, the UI operators, the demo and the bench.

``prepare_character`` reads one armature (skeleton, deformed meshes, bone map, key vertices) into a
``core.Character``; ``retarget`` reads the source animation, runs a method and writes the result as a NEW
Action on the target. The source Action is never modified; a failed run writes nothing.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

import numpy as np

from ..core.errors import CoreError
from ..core.types import Character, Motion
from .bridge import BridgeError, find_meshes, read_motion, read_skeleton, read_skinned_mesh, write_motion
from .bridge.write import remove_action

METHODS = ("copy_rotations", "reconform")


@dataclass
class RetargetResult:
    """What ``retarget`` produced.

    action: the new Action on the target (assigned with its slot).
    motion: the target core.Motion that was written, (T, J_target, ...).
    report: plain dict (JSON-serialisable) with inputs, bone maps, timings and metrics.
    """

    action: object
    motion: Motion
    report: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------ set-up

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


def fit_bone_map(arm_name: str, skeleton, bone_map: dict) -> dict:
    """Check a given bone map and fit it to ``skeleton`` (namespaces/case, absent bones dropped); raises
    BridgeError when nothing of it is left."""
    from ..core import bonemap
    bonemap.validate_bone_map(bone_map, what=f"Bone map for '{arm_name}'")
    fitted = dict(bonemap.apply_bone_map(skeleton, bone_map).bone_map)
    if not fitted:
        raise BridgeError(f"Nothing mapped on '{arm_name}': none of the bone map's bones exist in it; "
                          "fix the bone map or let it be detected.")
    return fitted


def prepare_character(arm_obj, bone_map=None, keyvert_count=41, need_mesh=False, fit_body=None,
                      report=None, action=None, frame_start=None, frame_end=None, motion=None) -> Character:
    """Read ``arm_obj`` into a core.Character.

    Args:
        bone_map: {canonical: bone}; detected automatically (``core.bonemap``) when None.
        keyvert_count: number of key vertices to transfer (41 or 96); 0/None skips the transfer.
        need_mesh: raise BridgeError when the armature deforms no mesh.
        fit_body: give a skeleton-only armature a fitted template body (``core.body``); default: when key
            vertices are asked for (``keyvert_count``) and ``need_mesh`` is False.
        report: callable taking one line of text (warnings, notes).
        action, frame_start, frame_end: the clip a fitted body is built from when the rest pose is not a
            standing humanoid (Bandai-Namco BVH lie on their side): its frame with both feet flat on the floor
            (``core.copy_rotations.reference_frame``, the same frame copy-rotations uses) gives the pose.
        motion: that clip already read (a core.Motion of this armature), so that it is not read twice.
    """
    report = report or (lambda msg: None)
    skeleton = read_skeleton(arm_obj)
    if bone_map is None:
        from ..core.bonemap import detect_bone_map
        res = detect_bone_map(skeleton)
        bone_map = dict(res.bone_map)
        if not bone_map:
            raise BridgeError(f"Nothing mapped on '{arm_obj.name}': no bone was recognised as part of a humanoid; "
                              "give a bone map (set-up file or Bone Map panel).")
        if res.missing_required:
            report(f"'{arm_obj.name}' ({res.rig_type}): required bones not found: "
                   f"{', '.join(res.missing_required)}.")
    else:
        bone_map = fit_bone_map(arm_obj.name, skeleton, dict(bone_map))
    if fit_body is None:
        fit_body = bool(keyvert_count) and not need_mesh
    mesh = None
    if find_meshes(arm_obj):
        mesh = read_skinned_mesh(arm_obj, skeleton, report=report)
    elif fit_body:
        from ..core.body import fit_body_to_skeleton
        mesh = fit_body_to_skeleton(skeleton, bone_map,
                                    base=_standing_base(arm_obj, skeleton, bone_map, action, frame_start,
                                                        frame_end, motion))
        report(f"'{arm_obj.name}' deforms no mesh: fitted a template body to its skeleton.")
    elif need_mesh:
        read_skinned_mesh(arm_obj, skeleton)  # raises the "deforms no mesh" BridgeError
    character = Character(skeleton=skeleton, mesh=mesh, bone_map=bone_map)
    if mesh is not None and keyvert_count:
        from ..core.keyverts import character_height, transfer_keyverts
        character.height = float(character_height(character))
        character.keyverts = transfer_keyverts(character, n=keyvert_count)
    return character


def _standing_base(arm_obj, skeleton, bone_map, action, frame_start, frame_end, motion=None):
    """(J, 4) basis rotations of the clip's reference frame when the rest pose is not a standing humanoid,
    else None (``core.copy_rotations.reference_basis`` on the frames being retargeted)."""
    from ..core.copy_rotations import reference_basis
    from ..core.tpose import rest_is_standing
    if rest_is_standing(skeleton, bone_map):
        return None
    if motion is None:
        act = action if action is not None else getattr(arm_obj.animation_data, "action", None)
        if act is None:
            return None
        motion = read_motion(arm_obj, skeleton, action=act, frame_start=frame_start, frame_end=frame_end)
    return reference_basis(Character(skeleton=skeleton, bone_map=bone_map), motion)


# ------------------------------------------------------------------------------------------------ retarget

def _map_report(character: Character) -> dict:
    mapped = set(character.bone_map.values())
    return {"armature": character.name, "bones": character.skeleton.num_bones, "mapped": len(mapped),
            "bone_map": dict(character.bone_map),
            "unmapped": [n for n in character.skeleton.names if n not in mapped]}


def _solver_settings(settings):
    from ..core.solver import SolverSettings
    if settings is None:
        return SolverSettings()
    if isinstance(settings, SolverSettings):
        return settings
    settings = dict(settings)
    quality = settings.pop("quality", "balanced")
    try:
        return SolverSettings.preset(quality, **settings)
    except TypeError as ex:
        raise BridgeError(f"Solver settings: {ex}; see docs/bridge.md for the accepted names.") from None


def retarget(source_obj, target_obj, method='copy_rotations', action=None, frame_start=None, frame_end=None,
             settings=None, setup=None, name=None, report=None, progress=None) -> RetargetResult:
    """Retarget the animation playing on ``source_obj`` onto ``target_obj`` as a NEW Action.

    Args:
        method: 'copy_rotations' (baseline, no mesh needed) or 'reconform' (key-vertex optimisation; the
            target needs a mesh, a skeleton-only source gets a fitted body).
        action: source Action (default: the one playing); frame_start/frame_end: inclusive scene frames.
        settings: core.solver.SolverSettings or a dict of its fields (+ 'quality'); 'reconform' only.
        setup: dict from ``load_setup`` (bone maps per role/armature, settings, keyvert_count).
        name: name of the new Action (default '<target>_<method>').
        report: callable taking one line of progress text; progress: callable taking a fraction in [0, 1].
    Raises:
        BridgeError (bad input, one line) or CoreError; nothing is written then.
    """
    if method not in METHODS:
        raise BridgeError(f"Unknown method '{method}': use one of {', '.join(METHODS)}.")
    say = report or (lambda msg: None)
    tick = progress or (lambda f: None)
    setup = setup or {}
    notes = []

    def note(msg):
        notes.append(msg)
        say(msg)

    if settings is None and setup.get("settings"):
        settings = dict(setup["settings"])
    reconform = method == 'reconform'
    kv = int(setup.get("keyvert_count", 41)) if reconform else 0
    timings = {}
    t0 = time.perf_counter()
    if reconform and not find_meshes(target_obj):  # fail before any slow work
        raise BridgeError(f"Armature '{target_obj.name}' deforms no mesh: add an Armature modifier pointing to it "
                          "on the character's mesh; the 'reconform' method needs the target's body.")
    say(f"reading source '{source_obj.name}'")
    src_motion = read_motion(source_obj, read_skeleton(source_obj), action=action, frame_start=frame_start,
                             frame_end=frame_end)
    src = prepare_character(source_obj, setup_bone_map(setup, "source", source_obj.name), keyvert_count=kv,
                            fit_body=reconform, report=note, action=action, frame_start=frame_start,
                            frame_end=frame_end, motion=src_motion)
    say(f"reading target '{target_obj.name}'")
    tgt = prepare_character(target_obj, setup_bone_map(setup, "target", target_obj.name), keyvert_count=kv,
                            need_mesh=reconform, report=note)
    src_action = action if action is not None else source_obj.animation_data.action
    timings["read_s"] = time.perf_counter() - t0
    say(f"source motion: {src_motion.num_frames} frames from {src_motion.frame_start} at {src_motion.fps:g} fps")
    tick(0.05)

    from ..core.copy_rotations import copy_rotations
    t1 = time.perf_counter()
    motion = copy_rotations(src, src_motion, tgt)
    motion = Motion(motion.rotations, motion.locations, fps=src_motion.fps, frame_start=src_motion.frame_start)
    timings["copy_rotations_s"] = time.perf_counter() - t1
    tick(0.1)
    solve = {}
    job = None
    if reconform:
        from ..core.solver import SolveJob
        job = SolveJob(src, src_motion, tgt, motion, _solver_settings(settings))
        t2 = time.perf_counter()
        last = -1.0
        for p in job.steps():
            tick(0.1 + 0.85 * float(p.fraction))
            if p.fraction - last >= 0.1 or p.fraction >= 1.0:
                last = p.fraction
                say(f"solve {p.step}/{p.total} loss {float(p.loss):.5g}")
        solved = job.result()
        motion = Motion(solved.rotations, solved.locations, fps=src_motion.fps, frame_start=src_motion.frame_start)
        timings["solve_s"] = time.perf_counter() - t2
        solve = {"metrics_solver": _plain(getattr(job, "metrics", None))}
    if not (np.isfinite(motion.rotations).all() and np.isfinite(motion.locations).all()):
        raise CoreError(f"Retarget '{source_obj.name}' -> '{target_obj.name}' produced NaN values; nothing written.")

    metrics = None
    if tgt.mesh is not None and src.mesh is not None and reconform:
        from ..core.metrics import evaluate
        # the source's labels are read above the floor the solve used (core.ground), the target's above its own
        metrics = _plain(evaluate(src, src_motion, tgt, motion, getattr(job.settings, "terrain", None),
                                  source_ground=job.source_ground_level))
        from ..core.ground import floor_advice
        advice = floor_advice(metrics)
        if advice:
            note(f"source '{source_obj.name}': {advice}")

    previous = None
    ad = target_obj.animation_data
    if ad is not None:
        previous = (ad.action, getattr(ad, "action_slot", None))
    new_name = name or f"{target_obj.name}_{method}"
    t3 = time.perf_counter()
    act = write_motion(target_obj, tgt.skeleton, motion, new_name)  # written last
    try:
        timings["write_s"] = time.perf_counter() - t3
        timings["total_s"] = time.perf_counter() - t0
        rep = {
            "method": method,
            "source": _map_report(src), "target": _map_report(tgt),
            "source_action": src_action.name if src_action is not None else None,
            "action": act.name,
            "frame_start": int(src_motion.frame_start), "frame_end": int(src_motion.frame_start + motion.num_frames - 1),
            "frames": int(motion.num_frames), "fps": float(src_motion.fps),
            "source_mesh": src.mesh.part_names if src.mesh is not None else None,
            "target_mesh": tgt.mesh.part_names if tgt.mesh is not None else None,
            "timings": {k: round(v, 4) for k, v in timings.items()},
            "metrics": metrics, "notes": notes, **solve,
        }
        json.dumps(rep, allow_nan=False)  # must stay strict JSON for --report
    except Exception:
        remove_action(target_obj, act, previous)
        raise
    tick(1.0)
    say(f"wrote Action '{act.name}' on '{target_obj.name}' ({motion.num_frames} frames)")
    return RetargetResult(act, motion, rep)


def _plain(value):
    """JSON-friendly copy of metrics (numpy scalars/arrays to Python)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray) and value.ndim > 0:
        return [_plain(v) for v in value.tolist()]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        value = value.item()  # numpy / torch scalars
    if isinstance(value, float) and not np.isfinite(value):
        return None  # strict JSON: undefined metrics (e.g. no locked contacts) become null
    if isinstance(value, (str, int, float, bool)):
        return value
    return str(value)
