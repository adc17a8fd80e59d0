"""Operators of the ReConForM panel. Thin: each reads the panel's settings, calls the bridge / pipeline / core,
and reports one line on failure.

Retarget (``reconform.retarget``) and Re-solve (``reconform.resolve``) are modal in the UI: inputs are read
into numpy on the main thread, ``core.solver.SolveJob.steps()`` runs in a worker thread (``SolveRunner``), a
window timer drains its queue into the panel's progress bar and the status bar, Esc cancels. Nothing is
written to bpy data before the FINISHED return (one undo step removes the new Action); a cancelled or failed
run leaves the scene as it was. ``execute()`` runs the same work synchronously (background mode, batch, tests).
"""

import queue
import threading
import time
import traceback
from dataclasses import dataclass, field

import bpy
from bpy.props import EnumProperty, StringProperty
from bpy_extras.io_utils import ExportHelper, ImportHelper

from . import deps

ROLE_ENUM = (('SOURCE', "Source", ""), ('TARGET', "Target", ""))

#: Conflict slider: balance b in [-1, 1] multiplies term A's weight by BALANCE_RANGE**(-b) and term B's by
#: BALANCE_RANGE**b (left end favours A, right end favours B).
BALANCE_RANGE = 4.0


# ------------------------------------------------------------------------------------------------------------
# Small helpers
# ------------------------------------------------------------------------------------------------------------
def settings_of(context):
    return context.scene.reconform


def _error_text(ex: Exception) -> str:
    """One line for a report: the message of our own errors, the type and message of anything else."""
    from ..core.errors import CoreError
    from .bridge import BridgeError

    msg = str(ex).strip().splitlines()[0] if str(ex).strip() else ""
    if isinstance(ex, (CoreError, BridgeError)):
        return msg or type(ex).__name__
    return f"{type(ex).__name__}: {msg}" if msg else type(ex).__name__


def _tag_redraw(context=None):
    wm = (context or bpy.context).window_manager
    for win in wm.windows:
        for area in win.screen.areas:
            if area.type == 'VIEW_3D':
                area.tag_redraw()


def check_characters(s, need_target: bool = True):
    """Raise a clear BridgeError when the panel's characters are not usable."""
    from .bridge import BridgeError

    if s.source is None:
        raise BridgeError("No source armature: pick the character whose animation you want to retarget.")
    if need_target and s.target is None:
        raise BridgeError("No target armature: pick the character that should receive the motion.")
    for role, ob in (("Source", s.source), ("Target", s.target)):
        if ob is not None and ob.type != 'ARMATURE':
            raise BridgeError(f"{role} '{ob.name}' is not an armature: pick an armature object.")
    if need_target and s.source == s.target:
        raise BridgeError(f"Source and target are both '{s.source.name}': pick two different armatures.")


def result_action_name(source_obj, target_obj, action=None) -> str:
    """Name of the new Action: '<source clip or armature> → <target>' (Blender adds .001 when taken)."""
    src = action.name if action is not None else source_obj.name
    return f"{src} to {target_obj.name}"


def push_to_nla(obj, action):
    """Push ``action`` (assigned with its slot) down onto a new NLA track of ``obj``; returns the strip."""
    ad = obj.animation_data or obj.animation_data_create()
    slot = getattr(ad, "action_slot", None)
    track = ad.nla_tracks.new()
    track.name = action.name
    start = int(action.frame_range[0])
    strip = track.strips.new(action.name, start, action)
    if slot is not None and hasattr(strip, "action_slot"):
        strip.action_slot = slot
    ad.action = None
    return strip


# ------------------------------------------------------------------------------------------------------------
# Worker thread driver (no bpy inside: the worker only sees numpy / torch objects)
# ------------------------------------------------------------------------------------------------------------
@dataclass
class SolveOutcome:
    """What the worker hands back: the solved Motion and what the panel shows about it."""

    result: object
    metrics: dict = field(default_factory=dict)
    reference: dict = field(default_factory=dict)
    conflicts: list = field(default_factory=list)
    seconds: float = 0.0
    iterations: int = 0


class SolveRunner:
    """Run ``job.steps()`` then ``finish(job)`` in a daemon thread; the main thread polls ``events()``.

    Events are tuples: ('progress', Progress), ('done', finish's return value), ('error', (exception, text)),
    ('cancelled', None). ``run_sync`` does the same on the calling thread (background mode).
    """

    def __init__(self, job, finish):
        self.job = job
        self.finish = finish
        self.queue = queue.Queue()
        self.thread = None
        self.started = None

    def _work(self):
        try:
            last = None
            for p in self.job.steps():
                self.queue.put(("progress", p))
                last = p
            if getattr(self.job, "cancelled", False) or self._cancel_requested():
                self.queue.put(("cancelled", None))
                return
            self.queue.put(("done", self.finish(self.job)))
            del last
        except Exception as ex:  # noqa: BLE001 - reported on the main thread
            self.queue.put(("error", (ex, traceback.format_exc())))

    def _cancel_requested(self) -> bool:
        ev = getattr(self.job, "_cancel", None) or getattr(self.job, "cancel_event", None)
        return bool(ev is not None and hasattr(ev, "is_set") and ev.is_set())

    def start(self):
        self.started = time.perf_counter()
        self.thread = threading.Thread(target=self._work, name="reconform-solve", daemon=True)
        self.thread.start()

    def events(self):
        out = []
        while True:
            try:
                out.append(self.queue.get_nowait())
            except queue.Empty:
                return out

    def cancel(self, wait: float = 0.0):
        self.job.cancel()
        if wait and self.thread is not None:
            self.thread.join(wait)

    def run_sync(self, on_progress=None):
        """Drive the job here; returns finish's value; raises the job's exception."""
        self.started = time.perf_counter()
        for p in self.job.steps():
            if on_progress:
                on_progress(p)
        return self.finish(self.job)


# ------------------------------------------------------------------------------------------------------------
# Retarget session: inputs read on the main thread, solved anywhere, written on the main thread
# ------------------------------------------------------------------------------------------------------------
@dataclass
class LastSolve:
    """Module-level memory of the last solve of a scene, for Re-solve (kept out of bpy data on purpose)."""

    source_name: str
    target_name: str
    action_name: str
    source: object
    source_motion: object
    target: object
    init_motion: object
    result: object
    settings: object
    iterations: int
    seconds: float
    job: object = None


#: {scene name: LastSolve}; Re-solve warm-starts from here.
_LAST: dict = {}
#: {scene name: SolveRunner} of runs in progress (one per scene).
_RUNNING: dict = {}


def last_solve(scene):
    return _LAST.get(scene.name_full)


def is_running(scene) -> bool:
    return scene.name_full in _RUNNING


def forget(scene=None):
    """Drop cached solves (all scenes, or one)."""
    if scene is None:
        _LAST.clear()
    else:
        _LAST.pop(scene.name_full, None)


@dataclass
class Prepared:
    source_obj_name: str
    target_obj_name: str
    action_name: str
    source: object
    source_motion: object
    target: object
    init_motion: object
    method: str
    push_nla: bool
    new_action_name: str


def prepare(context) -> Prepared:
    """Read everything the solve needs from the scene (main thread). Reads only, writes nothing."""
    from . import pipeline
    from .bridge import read_motion

    s = settings_of(context)
    check_characters(s)
    n = int(s.keyvert_count)
    src = pipeline.prepare_character(s.source, bone_map=s.bone_map('source') or None, keyvert_count=n)
    tgt = pipeline.prepare_character(s.target, bone_map=s.bone_map('target') or None, keyvert_count=n)
    fs, fe = s.frame_range()
    motion = read_motion(s.source, src.skeleton, action=s.action, frame_start=fs, frame_end=fe)
    from ..core.copy_rotations import copy_rotations

    init = copy_rotations(src, motion, tgt)
    return Prepared(s.source.name, s.target.name, s.action.name if s.action else "", src, motion, tgt, init,
                    s.method, s.push_to_nla, result_action_name(s.source, s.target, s.action))


def make_job(source, source_motion, target, init_motion, settings, warm_start=None):
    from ..core.solver import SolveJob

    return SolveJob(source, source_motion, target, init_motion, settings, warm_start=warm_start)


def _job_iterations(job, settings) -> int:
    for attr in ("total", "iterations"):
        v = getattr(job, attr, None)
        if isinstance(v, int):
            return v
    return int(getattr(settings, "iterations", 0) or 0)


def finish_solve(job, source, source_motion, target, init_motion, with_reference: bool = True) -> SolveOutcome:
    """Worker-side wrap-up: the result, its metrics (and copy-rotations' for comparison) and the conflicts."""
    t0 = time.perf_counter()
    result = job.result()
    from ..core import metrics as core_metrics

    m = dict(job.metrics)
    ref = {}
    if with_reference:
        ref = core_metrics.evaluate(job.source, source_motion, job.target, init_motion,
                                    getattr(job.settings, "terrain", None))
    conflicts = []
    try:
        from ..core.conflicts import detect_conflicts

        conflicts = list(detect_conflicts(job))
    except Exception:  # noqa: BLE001 - conflicts are advice; a failure must not lose the result
        traceback.print_exc()
    out = SolveOutcome(result, m, ref, conflicts)
    out.seconds = time.perf_counter() - t0
    return out


def conflict_fields(c) -> dict:
    """Normalise a ``core.conflicts.Conflict`` (dataclass / namedtuple / dict) to the panel's fields."""
    get = (lambda k, d=None: c.get(k, d)) if isinstance(c, dict) else (lambda k, d=None: getattr(c, k, d))
    terms = get("terms") or get("term_pair") or (get("term_a"), get("term_b"))
    cos = get("cosine", get("cos", 0.0))
    frames = get("frames", ())
    if isinstance(frames, str):
        frames_text = frames
    else:
        frames_text = format_frames(list(frames) if frames is not None else [])
    sev = get("severity")
    if sev is None:
        sev = max(0.0, min(1.0, -float(cos)))
    return dict(body_part=str(get("body_part", get("part", ""))), term_a=str(terms[0]), term_b=str(terms[1]),
                cosine=float(cos), severity=float(sev), frames=frames_text)


def format_frames(frames, limit: int = 6) -> str:
    """'12-18, 40, 52-60' from a list of frame numbers (sorted, merged into runs, at most ``limit`` runs)."""
    fr = sorted({int(f) for f in frames})
    runs = []
    for f in fr:
        if runs and f == runs[-1][1] + 1:
            runs[-1][1] = f
        else:
            runs.append([f, f])
    parts = [f"{a}-{b}" if b > a else f"{a}" for a, b in runs[:limit]]
    if len(runs) > limit:
        parts.append(f"… (+{len(runs) - limit})")
    return ", ".join(parts)


def fill_conflicts(s, conflicts):
    """Replace the panel's conflict list (sliders start centred)."""
    s.conflicts.clear()
    rows = sorted((conflict_fields(c) for c in conflicts), key=lambda r: -r["severity"])
    for r in rows:
        it = s.conflicts.add()
        for k, v in r.items():
            setattr(it, k, v)
        it.name = f"{r['body_part']}: {r['term_a']} / {r['term_b']}"
    s.conflicts_index = 0


def conflict_overrides(s, settings) -> dict:
    """SolverSettings changes from the conflict sliders: ``{"part_weights": {(body part, term): factor}}``.

    A conflict with balance b multiplies its term A by BALANCE_RANGE**(-b) and its term B by BALANCE_RANGE**b on
    that body part only; several conflicts on the same (part, term) multiply, and factors already in
    ``settings.part_weights`` (an earlier Re-solve) are kept and combined.
    """
    per_part = {}
    for c in s.conflicts:
        if abs(c.balance) < 1e-6:
            continue
        for term, sign in ((c.term_a, -1.0), (c.term_b, 1.0)):
            key = (c.body_part, term)
            per_part[key] = per_part.get(key, 1.0) * BALANCE_RANGE ** (sign * c.balance)
    if not per_part:
        return {}
    merged = dict(getattr(settings, "part_weights", None) or {})
    for k, f in per_part.items():
        merged[k] = merged.get(k, 1.0) * f
    return {"part_weights": merged}


def apply_outcome(context, prep_or_last, outcome: SolveOutcome, *, new_action_name: str, push_nla: bool,
                  method: str, settings=None, job=None, iterations: int = 0):
    """Main thread, FINISHED path only: write the Action, fill metrics and conflicts, remember the solve."""
    from .bridge import BridgeError, write_motion

    scene = context.scene
    s = scene.reconform
    tgt_obj = bpy.data.objects.get(prep_or_last.target_name if isinstance(prep_or_last, LastSolve)
                                   else prep_or_last.target_obj_name)
    if tgt_obj is None or tgt_obj.type != 'ARMATURE':
        raise BridgeError("The target armature was deleted or renamed during the solve; nothing was written.")
    act = write_motion(tgt_obj, prep_or_last.target.skeleton, outcome.result, new_action_name)
    if push_nla:
        push_to_nla(tgt_obj, act)
    s.last_action = act
    s.last_method = method
    if method == 'RECONFORM':
        s.set_metrics(outcome.metrics, outcome.reference)
        fill_conflicts(s, outcome.conflicts)
        if isinstance(prep_or_last, Prepared):
            _LAST[scene.name_full] = LastSolve(
                prep_or_last.source_obj_name, prep_or_last.target_obj_name, act.name, prep_or_last.source,
                prep_or_last.source_motion, prep_or_last.target, prep_or_last.init_motion, outcome.result,
                settings, iterations, outcome.seconds, job)
        else:
            last = prep_or_last
            last.result, last.job, last.action_name = outcome.result, job, act.name
    else:
        s.set_metrics(outcome.metrics, {})
        s.conflicts.clear()
    return act


# ------------------------------------------------------------------------------------------------------------
# Bone maps
# ------------------------------------------------------------------------------------------------------------
class _RoleMixin:
    role: EnumProperty(name="Character", items=ROLE_ENUM, default='SOURCE')

    def armature(self, context):
        return settings_of(context).character(self.role)


class RECONFORM_OT_detect_bone_map(_RoleMixin, bpy.types.Operator):
    """Detect which bone plays each canonical humanoid bone, from bone names and the hierarchy"""

    bl_idname = "reconform.detect_bone_map"
    bl_label = "Auto-Detect"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        s = settings_of(context)
        return s.source is not None or s.target is not None

    def execute(self, context):
        from ..core.bonemap import detect_bone_map
        from .bridge import read_skeleton

        s = settings_of(context)
        arm = self.armature(context)
        if arm is None:
            self.report({'ERROR'}, f"No {self.role.lower()} armature: pick one in the Characters panel.")
            return {'CANCELLED'}
        try:
            res = detect_bone_map(read_skeleton(arm))
        except Exception as ex:  # noqa: BLE001
            self.report({'ERROR'}, _error_text(ex))
            return {'CANCELLED'}
        s.set_bone_map(self.role, res.bone_map, res.rig_type, arm.name)
        if res.missing_required:
            self.report({'WARNING'}, f"'{arm.name}' ({res.rig_type}): required bones not found: "
                                     f"{', '.join(res.missing_required)}. Pick them in the list.")
        else:
            self.report({'INFO'}, f"'{arm.name}' ({res.rig_type}): {len(res.bone_map)} bones mapped, "
                                  f"{len(res.unmapped)} unmapped")
        return {'FINISHED'}


class RECONFORM_OT_save_bone_map(_RoleMixin, bpy.types.Operator, ExportHelper):
    """Save this character's bone map as a JSON preset"""

    bl_idname = "reconform.save_bone_map"
    bl_label = "Save Bone Map"
    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={'HIDDEN'})

    def invoke(self, context, event):
        arm = self.armature(context)
        if arm is not None and not self.filepath:
            self.filepath = bpy.path.clean_name(arm.name) + ".json"
        return ExportHelper.invoke(self, context, event)

    def execute(self, context):
        from ..core.bonemap import save_bone_map

        s = settings_of(context)
        bm = s.bone_map(self.role)
        if not bm:
            self.report({'ERROR'}, f"The {self.role.lower()} bone map is empty: run Auto-Detect or fill the list.")
            return {'CANCELLED'}
        try:
            save_bone_map(self.filepath, bm, getattr(s, f"{self.role.lower()}_rig_type"))
        except Exception as ex:  # noqa: BLE001
            self.report({'ERROR'}, f"Could not save '{self.filepath}': {_error_text(ex)}")
            return {'CANCELLED'}
        self.report({'INFO'}, f"Saved {len(bm)} bones to {self.filepath}")
        return {'FINISHED'}


class RECONFORM_OT_load_bone_map(_RoleMixin, bpy.types.Operator, ImportHelper):
    """Load a bone map preset (JSON) for this character; bones it names that the armature lacks are skipped"""

    bl_idname = "reconform.load_bone_map"
    bl_label = "Load Bone Map"
    bl_options = {'REGISTER', 'UNDO'}
    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={'HIDDEN'})

    def execute(self, context):
        from ..core.bonemap import load_bone_map

        s = settings_of(context)
        arm = self.armature(context)
        if arm is None:
            self.report({'ERROR'}, f"No {self.role.lower()} armature: pick one in the Characters panel.")
            return {'CANCELLED'}
        try:
            loaded = load_bone_map(self.filepath)
        except Exception as ex:  # noqa: BLE001
            self.report({'ERROR'}, f"Could not load '{self.filepath}': {_error_text(ex)}")
            return {'CANCELLED'}
        bm, rig_type = loaded
        return _apply_loaded_map(self, context, arm, bm, rig_type)


def _apply_loaded_map(op, context, arm, bm: dict, rig_type: str):
    """Fit a loaded bone map to ``arm`` (exact names, else ignoring namespaces and case) and store it."""
    from ..core.bonemap import apply_bone_map
    from .bridge import read_skeleton

    s = settings_of(context)
    try:
        res = apply_bone_map(read_skeleton(arm), bm)
    except Exception as ex:  # noqa: BLE001
        op.report({'ERROR'}, _error_text(ex))
        return {'CANCELLED'}
    kept = dict(res.bone_map)
    missing = sorted(set(bm) - set(kept))
    if not kept:
        op.report({'ERROR'}, f"None of the preset's bones exist in '{arm.name}': wrong preset for this rig?")
        return {'CANCELLED'}
    s.set_bone_map(op.role, kept, rig_type, arm.name)
    if missing:
        op.report({'WARNING'}, f"'{arm.name}' lacks {len(missing)} preset bones ({', '.join(missing[:4])}"
                               f"{'…' if len(missing) > 4 else ''}); they are unmapped")
    else:
        op.report({'INFO'}, f"Loaded {len(kept)} bones")
    return {'FINISHED'}


_PRESET_ITEMS = []  # Blender needs dynamic enum strings kept alive on the Python side


def _builtin_preset_items(self, context):
    from ..core.bonemap import list_presets

    _PRESET_ITEMS[:] = [(n, n.replace("_", " ").title(), f"Built-in bone map '{n}'") for n in list_presets()] \
        or [('NONE', "(none)", "No built-in presets")]
    return _PRESET_ITEMS


class RECONFORM_OT_load_builtin_bone_map(_RoleMixin, bpy.types.Operator):
    """Apply one of the built-in bone-map presets (Mixamo, Unreal, Rigify, ...) to this character"""

    bl_idname = "reconform.load_builtin_bone_map"
    bl_label = "Built-in Preset"
    bl_options = {'REGISTER', 'UNDO'}
    bl_property = "preset"

    preset: EnumProperty(name="Preset", items=_builtin_preset_items)

    def invoke(self, context, event):
        context.window_manager.invoke_search_popup(self)
        return {'RUNNING_MODAL'}

    def execute(self, context):
        from ..core.bonemap import load_preset

        arm = self.armature(context)
        if arm is None:
            self.report({'ERROR'}, f"No {self.role.lower()} armature: pick one in the Characters panel.")
            return {'CANCELLED'}
        if self.preset == 'NONE':
            return {'CANCELLED'}
        try:
            bm, rig_type = load_preset(self.preset)
        except Exception as ex:  # noqa: BLE001
            self.report({'ERROR'}, _error_text(ex))
            return {'CANCELLED'}
        return _apply_loaded_map(self, context, arm, bm, rig_type)


# ------------------------------------------------------------------------------------------------------------
# Key vertices
# ------------------------------------------------------------------------------------------------------------
class RECONFORM_OT_transfer_keyverts(_RoleMixin, bpy.types.Operator):
    """Place the template's key vertices on this character by optimal transport (hand-placed ones are kept
    unless 'Keep Locked' is off)"""

    bl_idname = "reconform.transfer_keyverts"
    bl_label = "Transfer Key Vertices"
    bl_options = {'REGISTER', 'UNDO'}

    keep_locked: bpy.props.BoolProperty(name="Keep Locked", default=True,
                                        description="Keep the key vertices placed by hand")

    @classmethod
    def poll(cls, context):
        s = settings_of(context)
        return s.source is not None or s.target is not None

    def execute(self, context):
        from ..core.keyverts import transfer_keyverts
        from . import keyverts as kv_addon
        from . import pipeline

        s = settings_of(context)
        arm = self.armature(context)
        if arm is None:
            self.report({'ERROR'}, f"No {self.role.lower()} armature: pick one in the Characters panel.")
            return {'CANCELLED'}
        n = int(s.keyvert_count)
        try:
            ch = pipeline.prepare_character(arm, bone_map=s.bone_map(self.role) or None, keyvert_count=n)
            locked = ch.keyverts if (self.keep_locked and ch.keyverts is not None
                                     and len(ch.keyverts) == n) else None
            kvs = transfer_keyverts(ch, n=n, locked=locked)
            kv_addon.store(arm, ch, kvs)
        except Exception as ex:  # noqa: BLE001
            self.report({'ERROR'}, _error_text(ex))
            return {'CANCELLED'}
        nl = int(kvs.locked.sum())
        self.report({'INFO'}, f"'{arm.name}': {len(kvs)} key vertices placed" + (f", {nl} locked kept" if nl else ""))
        _tag_redraw(context)
        return {'FINISHED'}


class RECONFORM_OT_reset_keyverts(_RoleMixin, bpy.types.Operator):
    """Re-place every key vertex that was not placed by hand (locked ones stay)"""

    bl_idname = "reconform.reset_keyverts"
    bl_label = "Reset Unlocked"
    bl_options = {'REGISTER', 'UNDO'}

    def execute(self, context):
        return bpy.ops.reconform.transfer_keyverts(role=self.role, keep_locked=True)


class RECONFORM_OT_unlock_keyverts(_RoleMixin, bpy.types.Operator):
    """Unlock every key vertex of this character (the next transfer re-places them all)"""

    bl_idname = "reconform.unlock_keyverts"
    bl_label = "Unlock All"
    bl_options = {'REGISTER', 'UNDO'}

    def execute(self, context):
        from . import gizmos

        arm = self.armature(context)
        items = gizmos.keyvert_items(gizmos.keyvert_holder(arm)) if arm is not None else None
        if not items:
            self.report({'ERROR'}, "This character has no key vertices yet: run Transfer first.")
            return {'CANCELLED'}
        for it in items:
            it.locked = False
        _tag_redraw(context)
        return {'FINISHED'}


# ------------------------------------------------------------------------------------------------------------
# Retarget and Re-solve
# ------------------------------------------------------------------------------------------------------------
class _SolveModalBase:
    """Shared modal machinery: worker thread, timer, progress, Esc, write on FINISHED only."""

    _runner = None
    _timer = None
    _saved = None

    # subclasses: self._start(context) -> (runner or None); self._apply(context, outcome) -> action
    def _set_progress(self, context, p):
        s = settings_of(context)
        frac = float(getattr(p, "fraction", 0.0))
        s.progress = frac
        loss = getattr(p, "loss", None)
        step, total = getattr(p, "step", None), getattr(p, "total", None)
        txt = f"Solving {step}/{total}" if step is not None else "Solving"
        if loss is not None:
            txt += f", loss {float(loss):.4g}"
        s.status = txt
        context.window_manager.progress_update(frac)
        _tag_redraw(context)

    def _save_state(self, context):
        s = settings_of(context)
        self._saved = (s.progress, s.status)

    def _restore_state(self, context):
        if self._saved is not None:
            s = settings_of(context)
            s.progress, s.status = self._saved

    def _cleanup(self, context):
        wm = context.window_manager
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
            self._timer = None
        wm.progress_end()
        _RUNNING.pop(context.scene.name_full, None)
        _tag_redraw(context)

    def cancel_run(self, context):
        """Esc / window closed: stop the worker, forget everything, restore the panel. Writes nothing."""
        if self._runner is not None:
            self._runner.cancel()
        self._cleanup(context)
        self._restore_state(context)
        self._runner = None

    def invoke(self, context, event):
        if bpy.app.background:
            return self.execute(context)
        if is_running(context.scene):
            self.report({'ERROR'}, "A retarget is already running in this scene (Esc cancels it).")
            return {'CANCELLED'}
        self._save_state(context)
        try:
            runner = self._start(context)
        except Exception as ex:  # noqa: BLE001
            self._restore_state(context)
            self.report({'ERROR'}, _error_text(ex))
            return {'CANCELLED'}
        if runner is None:  # finished synchronously (copy rotations)
            return {'FINISHED'}
        self._runner = runner
        _RUNNING[context.scene.name_full] = runner
        wm = context.window_manager
        wm.progress_begin(0.0, 1.0)
        settings_of(context).status = "Starting solver…"
        runner.start()
        self._timer = wm.event_timer_add(0.1, window=context.window)
        wm.modal_handler_add(self)
        return {'RUNNING_MODAL'}

    def modal(self, context, event):
        if event.type == 'ESC' and event.value == 'PRESS':
            self.cancel_run(context)
            self.report({'WARNING'}, "Retarget cancelled: nothing was changed")
            return {'CANCELLED'}
        if event.type != 'TIMER' or self._runner is None:
            return {'PASS_THROUGH'}
        return self.handle_events(context, self._runner.events())

    def handle_events(self, context, events):
        """Process worker events (main thread). Returns the modal return set."""
        for kind, payload in events:
            if kind == "progress":
                self._set_progress(context, payload)
            elif kind == "cancelled":
                self.cancel_run(context)
                return {'CANCELLED'}
            elif kind == "error":
                ex, tb = payload
                print(tb)
                self.cancel_run(context)
                self.report({'ERROR'}, f"Retarget failed, nothing was written: {_error_text(ex)}")
                return {'CANCELLED'}
            elif kind == "done":
                self._cleanup(context)
                try:
                    act = self._apply(context, payload)
                except Exception as ex:  # noqa: BLE001
                    self._restore_state(context)
                    self.report({'ERROR'}, _error_text(ex))
                    return {'CANCELLED'}
                self._runner = None
                self._report_done(context, act, payload)
                return {'FINISHED'}
        return {'RUNNING_MODAL'}

    def _report_done(self, context, act, outcome):
        s = settings_of(context)
        s.progress = 1.0
        took = time.perf_counter() - (self._runner_started or time.perf_counter())
        s.status = f"Wrote '{act.name}' in {took:.1f} s"
        self.report({'INFO'}, s.status)

    _runner_started = None

    def run_sync(self, context):
        """The whole run on this thread (execute path)."""
        self._save_state(context)
        self._runner_started = time.perf_counter()
        try:
            runner = self._start(context)
            if runner is None:
                return {'FINISHED'}
            outcome = runner.run_sync()
            act = self._apply(context, outcome)
        except Exception as ex:  # noqa: BLE001
            self._restore_state(context)
            traceback.print_exc()
            self.report({'ERROR'}, _error_text(ex))
            return {'CANCELLED'}
        self._report_done(context, act, outcome)
        return {'FINISHED'}


class RECONFORM_OT_retarget(_SolveModalBase, bpy.types.Operator):
    """Retarget the source's animation onto the target as a new Action (Esc cancels and changes nothing)"""

    bl_idname = "reconform.retarget"
    bl_label = "Retarget"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        s = getattr(context.scene, "reconform", None)
        if s is None or s.source is None or s.target is None or is_running(context.scene):
            return False
        return True

    def execute(self, context):
        return self.run_sync(context)

    def _start(self, context):
        s = settings_of(context)
        ok, msg = deps.torch_status()
        if not ok:
            raise RuntimeError(f"PyTorch is missing ({msg}): the ReConForM panel shows how to install it.")
        self._runner_started = time.perf_counter()
        prep = prepare(context)
        self._prep = prep
        if prep.method == 'COPY_ROTATIONS':
            from ..core import metrics as core_metrics

            m = {}
            try:
                m = core_metrics.evaluate(prep.source, prep.source_motion, prep.target, prep.init_motion)
            except Exception:  # noqa: BLE001 - metrics are informative only
                traceback.print_exc()
            act = apply_outcome(context, prep, SolveOutcome(prep.init_motion, m), new_action_name=prep.new_action_name,
                                push_nla=prep.push_nla, method=prep.method)
            self._report_done(context, act, None)
            return None
        settings = s.solver_settings()
        self._settings = settings
        job = make_job(prep.source, prep.source_motion, prep.target, prep.init_motion, settings)
        self._job = job
        return SolveRunner(job, lambda j: finish_solve(j, prep.source, prep.source_motion, prep.target,
                                                       prep.init_motion))

    def _apply(self, context, outcome):
        prep = self._prep
        return apply_outcome(context, prep, outcome, new_action_name=prep.new_action_name, push_nla=prep.push_nla,
                             method=prep.method, settings=self._settings, job=self._job,
                             iterations=_job_iterations(self._job, self._settings))


class RECONFORM_OT_resolve(_SolveModalBase, bpy.types.Operator):
    """Solve again from the last result with the conflict sliders applied, using a fraction of the iterations"""

    bl_idname = "reconform.resolve"
    bl_label = "Re-solve"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        return last_solve(context.scene) is not None and not is_running(context.scene)

    def execute(self, context):
        return self.run_sync(context)

    def _start(self, context):
        s = settings_of(context)
        last = last_solve(context.scene)
        if last is None:
            raise RuntimeError("Nothing to re-solve: run Retarget first.")
        self._runner_started = time.perf_counter()
        settings = resolve_settings(s, last)
        self._settings = settings
        self._last = last
        job = make_job(last.source, last.source_motion, last.target, last.init_motion, settings,
                       warm_start=last.result)
        self._job = job
        return SolveRunner(job, lambda j: finish_solve(j, last.source, last.source_motion, last.target,
                                                       last.init_motion))

    def _apply(self, context, outcome):
        last = self._last
        s = settings_of(context)
        src = bpy.data.objects.get(last.source_name)
        tgt = bpy.data.objects.get(last.target_name)
        if src is None or tgt is None:
            from .bridge import BridgeError

            raise BridgeError("The characters of the last solve were deleted or renamed; run Retarget again.")
        name = result_action_name(src, tgt, s.action) + " (re-solved)"
        return apply_outcome(context, last, outcome, new_action_name=name, push_nla=s.push_to_nla,
                             method='RECONFORM', settings=self._settings, job=self._job,
                             iterations=last.iterations)


def resolve_settings(s, last):
    """Settings of a Re-solve: the last solve's with the conflict sliders applied and the panel's share of its
    iterations (``resolve_fraction``; the job starts from the last result with α held at 1)."""
    import dataclasses

    changes = conflict_overrides(s, last.settings)
    changes["resolve_fraction"] = float(s.warm_start_fraction)
    return dataclasses.replace(last.settings, **changes)


# ------------------------------------------------------------------------------------------------------------
class RECONFORM_OT_apply_preset(bpy.types.Operator):
    """Copy the quality preset's values into the advanced fields"""

    bl_idname = "reconform.apply_preset"
    bl_label = "Load Preset Values"
    bl_options = {'REGISTER', 'UNDO'}

    def execute(self, context):
        ok, msg = deps.torch_status()
        if not ok:
            self.report({'ERROR'}, "PyTorch is missing: " + msg)
            return {'CANCELLED'}
        settings_of(context).apply_preset()
        return {'FINISHED'}


class RECONFORM_OT_reset_conflicts(bpy.types.Operator):
    """Centre every conflict slider"""

    bl_idname = "reconform.reset_conflicts"
    bl_label = "Reset Sliders"
    bl_options = {'REGISTER', 'UNDO'}

    def execute(self, context):
        for c in settings_of(context).conflicts:
            c.balance = 0.0
        return {'FINISHED'}


classes = (
    RECONFORM_OT_detect_bone_map,
    RECONFORM_OT_save_bone_map,
    RECONFORM_OT_load_bone_map,
    RECONFORM_OT_load_builtin_bone_map,
    RECONFORM_OT_transfer_keyverts,
    RECONFORM_OT_reset_keyverts,
    RECONFORM_OT_unlock_keyverts,
    RECONFORM_OT_retarget,
    RECONFORM_OT_resolve,
    RECONFORM_OT_apply_preset,
    RECONFORM_OT_reset_conflicts,
)


def unregister():
    for r in list(_RUNNING.values()):
        try:
            r.cancel()
        except Exception:  # noqa: BLE001
            pass
    _RUNNING.clear()
    _LAST.clear()
