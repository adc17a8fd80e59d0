"""The one retarget path on the Blender side: read the scene into core specs, drive ``core.pipeline.retarget``, write
the outcome. The panel's modal operator, the batch command (tools/retarget.py), ``make demo`` and ``make bench``
all go through here, so a set-up tuned in the panel gives the same result headless.

    specs = read_inputs(source_obj, target_obj, action=..., setup=...)        # main thread: bpy -> arrays
    job = make_job(specs, options, window)                                  # core.pipeline.retarget.Retarget (or .windows)
    for step in job.steps(): ...                                            # any thread (the panel: a worker)
    action = write_outcome(target_obj, job.outcome, name, ...)              # main thread: arrays -> bpy

``retarget`` does the three in a row (batch, demo, bench). The source Action is never modified; a failed or
cancelled run writes nothing.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace

from ..core.character.complete import CharacterSpec, check_character
from ..core.errors import CoreError
from ..core.pipeline.retarget import METHODS, Outcome, RetargetOptions, run
from ..core.types import Character, Motion
from ..core.pipeline.windows import WindowPlan, retarget_job
from .bridge import (BridgeError, find_meshes, read_motion, read_skeleton, read_skinned_mesh,
                     write_motion)
from .bridge import bodyparts
from .bridge import keyverts as kv_storage
from .bridge import library
from .bridge import terrain as ground_bridge
from .bridge.write import assignment_state, remove_action
from .run_report import make_report
from .setup_file import resolve_ground, setup_bone_map, setup_ground, setup_options, setup_window


#: ``retarget`` prints a step of the same kind at least this often (seconds) on a long clip
PRINT_EVERY_S = 5.0
_COUNTS = re.compile(r"\d+(\.\d+)?( ?%|/\d+)")      # '12/120', '45 %': what changes between steps of one kind


@dataclass
class RetargetResult:
    """What ``retarget`` produced.

    action: the new Action on the target (assigned with its slot).
    motion: the target core.Motion that was written, (T, J_target, ...).
    report: plain dict (JSON-serialisable) with inputs, bone maps, timings, metrics and conflicts.
    outcome: the core.pipeline.retarget.Outcome.
    """

    action: object
    motion: Motion
    report: dict = field(default_factory=dict)
    outcome: Outcome = None


@dataclass(frozen=True)
class Inputs:
    """What a retarget reads from the scene (plain arrays; any thread may use it)."""

    source_name: str
    target_name: str
    source_action: str
    source: CharacterSpec
    source_motion: Motion
    target: CharacterSpec
    notes: tuple = ()           #: lines for the user about what was read (a clamped frame range)
    ground: object = None       #: core.contacts.terrain.GroundSurface of the target's ground object, or None (z = 0)


def result_action_name(source_obj, target_obj, action=None) -> str:
    """Name of every new Action a retarget writes (panel, batch, demo): '<source clip> to <target>', the clip
    being ``action`` or the Action playing on the source (the source armature's name when only NLA tracks
    play); Blender adds .001 when the name is taken. A Re-solve appends ' (re-solved)'."""
    if action is None:
        action = getattr(source_obj.animation_data, "action", None)
    src = action.name if action is not None else source_obj.name
    return f"{src} to {target_obj.name}"


# ------------------------------------------------------------------------------------------------ read

def read_character(arm_obj, bone_map=None, clip: Motion = None, need_mesh: bool = False,
                   mesh_choice: dict = None) -> CharacterSpec:
    """Read ``arm_obj`` into a CharacterSpec: skeleton, every mesh it moves merged (None without any), the
    given bone map (None: detected by the core), the key vertices stored on its mesh, ``clip`` (the clip it
    plays when it is the source) and which meshes form its body: the choices stored on the armature
    (``bridge.bodyparts``), overridden by ``mesh_choice`` ({mesh name: bool}, a set-up's)."""
    skeleton = read_skeleton(arm_obj)
    mesh = None
    if find_meshes(arm_obj):
        mesh = read_skinned_mesh(arm_obj, skeleton)
    elif need_mesh:
        read_skinned_mesh(arm_obj, skeleton)  # raises the "deforms no mesh" BridgeError
    stored = kv_storage.load(arm_obj, Character(skeleton, mesh)) if mesh is not None else None
    choice = {**bodyparts.stored_choice(arm_obj), **(mesh_choice or {})}
    return CharacterSpec(skeleton, mesh, bone_map, stored, clip, choice or None)


def prepare_character(arm_obj, bone_map=None, keyvert_count: int = 41, need_mesh: bool = False, fit_body=None,
                      clip: Motion = None, report=None) -> Character:
    """One complete core.Character of ``arm_obj`` (``read_character`` then ``core.character.complete.build_character``:
    the same completion as a retarget's). ``fit_body`` (default: when key vertices are asked for and no mesh is
    needed) gives a skeleton-only armature the template fitted to its skeleton, standing it up from ``clip``
    when its rest pose lies down; ``report`` receives the notes."""
    from ..core.character.complete import build_character

    if fit_body is None:
        fit_body = bool(keyvert_count) and not need_mesh
    act = getattr(arm_obj.animation_data, "action", None)
    if clip is None and fit_body and act is not None and not find_meshes(arm_obj):   # its body stands up from it
        clip = read_motion(arm_obj, read_skeleton(arm_obj), action=act)
    built = build_character(read_character(arm_obj, bone_map, clip, need_mesh), keyvert_count=keyvert_count,
                            fit_body=fit_body, need_mesh=need_mesh)
    for n in built.notes:
        (report or (lambda msg: None))(n)
    return built.character


def read_inputs(source_obj, target_obj, *, method: str = "reconform", action=None, frame_start=None,
                frame_end=None, source_bone_map=None, target_bone_map=None, keyvert_count: int = 41,
                source_meshes=None, target_meshes=None, ground=None, ground_options=None) -> Inputs:
    """Read everything a retarget needs from the scene (main thread). Reads only, writes nothing.
    ``source_meshes`` / ``target_meshes``: {mesh name: bool}, which meshes form each body (a set-up's).
    ``ground``: the object the target walks on (its evaluated surface, ``bridge.terrain.read_ground``), or None
    for the world floor z = 0; ``ground_options``: {'spacing': metres, 'ceiling': world z} for it.

    Fails fast, target first: the armatures, whether the target can keep a new Action (not linked, not a
    non-editable override), its mesh when the method needs one and its bone map are checked before the source
    clip is read (``core.character.complete.check_character``: milliseconds); then the source clip (``read_motion``
    checks its range and keys), the source's bone map, and the ground object."""
    if method not in METHODS:
        raise BridgeError(f"Unknown method '{method}': use one of {', '.join(METHODS)}.")
    for role, ob in (("Source", source_obj), ("Target", target_obj)):
        if ob is None:
            raise BridgeError(f"No {role.lower()} armature: pick one.")
        if ob.type != 'ARMATURE':
            raise BridgeError(f"{role} '{ob.name}' is not an armature: pick an armature object.")
    if source_obj == target_obj:
        raise BridgeError(f"Source and target are both '{source_obj.name}': pick two different armatures.")
    blocker = library.animation_blocker(target_obj)
    if blocker:
        raise BridgeError(blocker)
    reconform = method == "reconform"
    if reconform and not find_meshes(target_obj):  # fail before any slow work
        raise BridgeError(f"Armature '{target_obj.name}' deforms no mesh: add an Armature modifier pointing to it "
                          "on the character's mesh; the 'reconform' method needs the target's body.")
    count = keyvert_count if reconform else 0
    tgt = read_character(target_obj, target_bone_map, need_mesh=reconform, mesh_choice=target_meshes)
    check_character(tgt, keyvert_count=count, need_mesh=reconform, role="Target")
    notes = []
    skeleton = read_skeleton(source_obj)
    motion = read_motion(source_obj, skeleton, action=action, frame_start=frame_start, frame_end=frame_end,
                         report=notes.append)
    src = read_character(source_obj, source_bone_map, clip=motion, mesh_choice=source_meshes)
    check_character(src, keyvert_count=count, role="Source")
    surface = None
    if ground is not None:
        opts = dict(ground_options or {})
        surface = ground_bridge.read_ground(ground, spacing=opts.get("spacing"), ceiling=opts.get("ceiling"),
                                            characters=(source_obj, target_obj))
    act = action if action is not None else getattr(source_obj.animation_data, "action", None)
    return Inputs(source_obj.name, target_obj.name, act.name if act is not None else "", src, motion, tgt,
                  notes=tuple(notes), ground=surface)


def make_job(inputs: Inputs, options: RetargetOptions, window: WindowPlan = None):
    """The core retarget of ``inputs`` (pure core: drive it in any thread): ``core.pipeline.retarget.Retarget``, or with a
    ``window`` plan and a clip longer than one window ``core.pipeline.windows.WindowedRetarget``; the ground object read
    with them becomes the options' ground."""
    if inputs.ground is not None and options.ground is None:
        options = replace(options, ground=inputs.ground)
    return retarget_job(inputs.source, inputs.source_motion, inputs.target, options, window)


# ------------------------------------------------------------------------------------------------ write

def write_outcome(target_obj, outcome: Outcome, name: str, *, source_obj=None, store_keyverts: bool = True,
                  report=None):
    """Main thread: write ``outcome.motion`` as a NEW Action on ``target_obj`` (assigned with its slot) and store
    the key vertices the retarget transferred on the characters' meshes. All or nothing: everything is checked
    before the first change (a linked or non-editable target raises BridgeError), and on a failure the new
    Action is removed, the previous assignment and the stored key vertices restored.

    Key vertices are not stored on a linked or overridden mesh (Blender keeps no add-on data there):
    ``report`` (a callable taking one line) says so, and the next run transfers them again."""
    say = report or (lambda msg: None)
    blocker = library.animation_blocker(target_obj)
    if blocker:
        raise BridgeError(blocker)
    to_store = []
    if store_keyverts:
        objs = {"source": source_obj, "target": target_obj}
        for role, kvs in outcome.keyverts_to_store().items():
            arm, character = objs.get(role), outcome.built[role].character
            if arm is None:
                continue
            why = kv_storage.store_blocker(arm, character, kvs)
            if why:
                say(f"Key vertices of '{arm.name}' not stored ({why}): the next run transfers them again; place "
                    "them in the character's own file to keep them.")
            else:
                to_store.append((arm, character, kvs))
    saved = kv_storage.snapshot([arm for arm, _, _ in to_store])
    previous = assignment_state(target_obj)
    act = write_motion(target_obj, *outcome.for_scene(), name)
    try:
        for arm, character, kvs in to_store:
            kv_storage.store(arm, character, kvs)
        for role, arm in (("source", source_obj), ("target", target_obj)):   # the body's meshes, for the panel
            if arm is not None and arm.library is None and not outcome.built[role].fitted_body:
                bodyparts.remember_left_out(arm, outcome.built[role].meshes_left_out)
    except Exception:
        kv_storage.restore(saved)
        remove_action(target_obj, act, previous)
        raise
    return act


# ------------------------------------------------------------------------------------------------ all three

def step_reporter(say, tick):
    """``on_step(step)`` for a retarget generator (single or group): every Step's fraction to ``tick``, one line to
    ``say`` per new kind of step (each phase, each part of the solver's set-up), and within one kind (solver steps,
    the metrics' passes) every 10 % of the retarget or every PRINT_EVERY_S seconds."""
    last = {"kind": None, "fraction": -1.0, "time": 0.0}

    def on_step(step):
        tick(step.fraction)
        kind = (step.phase, _COUNTS.sub("#", step.message))
        now = time.perf_counter()
        if kind != last["kind"] or step.fraction - last["fraction"] >= 0.1 or now - last["time"] >= PRINT_EVERY_S:
            last.update(kind=kind, fraction=step.fraction, time=now)
            say(step.message.rstrip("…"))
    return on_step


def retarget(source_obj, target_obj, method='copy_rotations', action=None, frame_start=None, frame_end=None,
             settings=None, setup=None, name=None, report=None, progress=None,
             store_keyverts: bool = True, ground=None) -> RetargetResult:
    """Retarget the animation playing on ``source_obj`` onto ``target_obj`` as a NEW Action (read, the core
    generator, write: the same path as the panel's Retarget).

    Args:
        method: 'copy_rotations' (baseline, no mesh needed) or 'reconform' (key-vertex optimisation; the
            target needs a mesh, a skeleton-only source gets a fitted body).
        action: source Action (default: the one playing); frame_start/frame_end: inclusive scene frames.
        settings: core.solver.SolverSettings or a dict of its fields (+ 'quality'); 'reconform' only.
        setup: dict from ``load_setup`` (bone maps per role/armature, settings, keyvert_count, ground, window).
        name: name of the new Action (default '<source clip> to <target>').
        report: callable taking one line of progress text; progress: callable taking a fraction in [0, 1].
        store_keyverts: store the key vertices the retarget transferred on the characters' meshes.
        ground: the object the target walks on (default: the set-up's ``"ground"``, else the world floor).
    Raises:
        BridgeError (bad input, one line) or CoreError; nothing is written then.
    """
    say = report or (lambda msg: None)
    tick = progress or (lambda f: None)
    setup = setup or {}
    t0 = time.perf_counter()
    say(f"reading '{source_obj.name}' and '{target_obj.name}'")
    ground_entry = setup_ground(setup)
    if ground is None and ground_entry:
        ground = resolve_ground(ground_entry, report=say)
    inputs = read_inputs(source_obj, target_obj, method=method, action=action, frame_start=frame_start,
                         frame_end=frame_end, source_bone_map=setup_bone_map(setup, "source", source_obj.name),
                         target_bone_map=setup_bone_map(setup, "target", target_obj.name),
                         keyvert_count=int(setup.get("keyvert_count", 41)),
                         source_meshes=bodyparts.setup_choice(setup.get("source"), source_obj),
                         target_meshes=bodyparts.setup_choice(setup.get("target"), target_obj),
                         ground=ground, ground_options=ground_entry)
    if inputs.ground is not None:
        say(f"ground '{inputs.ground.name}': {len(inputs.ground.triangles)} triangles")
    mo = inputs.source_motion
    for n in inputs.notes:
        say(n)
    say(f"source motion: {mo.num_frames} frames from {mo.frame_start} at {mo.fps:g} fps")
    timings = {"read_s": time.perf_counter() - t0}
    job = make_job(inputs, setup_options(method, settings, setup), setup_window(setup))
    outcome = run(job, step_reporter(say, tick))
    for n in outcome.notes:
        say(n)
    timings.update(outcome.timings)
    new_name = name or result_action_name(source_obj, target_obj, action)
    rep = make_report(inputs, outcome, new_name, timings)   # before the write: nothing can fail after it

    def note(msg):
        say(msg)
        rep["notes"].append(msg)
    t3 = time.perf_counter()
    act = write_outcome(target_obj, outcome, new_name, source_obj=source_obj, store_keyverts=store_keyverts,
                        report=note)
    rep["action"] = act.name
    rep["timings"]["write_s"] = round(time.perf_counter() - t3, 4)
    rep["timings"]["total_s"] = round(time.perf_counter() - t0, 4)
    tick(1.0)
    say(f"wrote Action '{act.name}' on '{target_obj.name}' ({outcome.motion.num_frames} frames)")
    return RetargetResult(act, outcome.for_scene()[1], rep, outcome)


__all__ = ["Inputs", "RetargetResult", "make_job", "prepare_character", "read_character", "read_inputs",
           "result_action_name", "retarget", "step_reporter", "write_outcome", "CoreError"]
