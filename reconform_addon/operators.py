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


def _status_bar(context, text):
    """Show ``text`` in the window's status bar (None restores it); silently skipped without a workspace."""
    ws = getattr(context, "workspace", None)
    if ws is not None and hasattr(ws, "status_text_set"):
        try:
            ws.status_text_set(text)
        except Exception:  # noqa: BLE001 - cosmetic only
            pass


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
    """Run a solve in a daemon thread; the main thread polls ``events()``.

    ``job`` is a SolveJob-like object (``steps()``, ``cancel()``, ``result()``) or a factory
    ``f(say) -> job`` run in the worker first (key-vertex transfer, copy-rotations and solver set-up are pure
    core work, so they run there too and the viewport stays responsive); ``say(text)`` posts a status line.
    Events are tuples: ('status', text), ('progress', Progress), ('done', finish(job)),
    ('error', (exception, traceback text)), ('cancelled', None). ``run_sync`` does it all on the calling thread.
    """

    def __init__(self, job, finish):
        if hasattr(job, "steps"):
            self.job, self._factory = job, None
        else:
            self.job, self._factory = None, job
        self.finish = finish
        self.queue = queue.Queue()
        self.thread = None
        self.started = None
        self._cancel = threading.Event()

    def _say(self, text):
        self.queue.put(("status", str(text)))

    def _work(self):
        try:
            if self.job is None:
                self.job = self._factory(self._say)
            for p in self.job.steps():
                self.queue.put(("progress", p))
                if self._cancel.is_set():
                    break
            if self._cancel.is_set() or getattr(self.job, "cancelled", False):
                self.queue.put(("cancelled", None))
                return
            self._say("Measuring the result…")
            self.queue.put(("done", self.finish(self.job)))
        except Exception as ex:  # noqa: BLE001 - reported on the main thread
            if self._cancel.is_set():
                self.queue.put(("cancelled", None))
            else:
                self.queue.put(("error", (ex, traceback.format_exc())))

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
        """Thread-safe: stop between steps (or right after the set-up). ``wait``: seconds to join the thread."""
        self._cancel.set()
        job = self.job
        if job is not None:
            job.cancel()
        if wait and self.thread is not None:
            self.thread.join(wait)

    def run_sync(self, on_progress=None):
        """Drive the job here; returns finish's value; raises the job's exception."""
        self.started = time.perf_counter()
        if self.job is None:
            self.job = self._factory(lambda text: None)
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
    reference: dict = None


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
    transferred: dict = field(default_factory=dict)  #: {armature name: (Character, KeyVertexSet)} to store
    keyvert_count: int = 0
    to_transfer: list = field(default_factory=list)  #: [(armature name, Character, storable)] for ``complete``


def stored_keyverts(arm, character, n: int):
    """Key vertices stored on ``arm``'s mesh (``reconform_addon.keyverts``), or None when absent, of another
    template size, or pointing outside the mesh."""
    try:
        from . import keyverts as kv_addon
    except ImportError:
        return None
    load = getattr(kv_addon, "load", None)
    if load is None or character.mesh is None:
        return None
    kvs = load(arm, character)
    if kvs is None or len(kvs) != n:
        return None
    if len(kvs.vertex_ids) and (kvs.vertex_ids.min() < 0 or kvs.vertex_ids.max() >= character.mesh.num_verts):
        return None
    return kvs


def store_keyverts(arm, character, kvs):
    """Store transferred key vertices on ``arm``'s mesh so the viewport shows them and later runs reuse them."""
    try:
        from . import keyverts as kv_addon
    except ImportError:
        return False
    store = getattr(kv_addon, "store", None)
    if store is None:
        return False
    store(arm, character, kvs)
    return True


def prepare_role(arm, bone_map, n: int, *, fit_body: bool, need_mesh: bool, action=None, frame_start=None,
                 frame_end=None, motion=None):
    """(Character, needs_transfer): skeleton, mesh, bone map, height and the key vertices stored on the
    character when there are any (``n`` of them). Reads only; main thread. ``action``/``frame_start``/
    ``frame_end`` name the clip a fitted body stands up from, ``motion`` that clip when already read (see
    ``pipeline.prepare_character``)."""
    from . import pipeline

    ch = pipeline.prepare_character(arm, bone_map=bone_map, keyvert_count=0, need_mesh=need_mesh,
                                    fit_body=fit_body, action=action, frame_start=frame_start,
                                    frame_end=frame_end, motion=motion)
    if ch.mesh is None or not n:
        return ch, False
    from ..core.keyverts import character_height

    ch.height = float(character_height(ch))
    ch.keyverts = stored_keyverts(arm, ch, n)
    return ch, ch.keyverts is None


def find_meshes_safe(arm):
    from .bridge import find_meshes

    try:
        return find_meshes(arm)
    except Exception:  # noqa: BLE001
        return []


def prepare(context) -> Prepared:
    """Read everything the solve needs from the scene (main thread). Reads only, writes nothing.

    Heavy pure-core work (key-vertex transfer, copy-rotations) is left to ``complete`` (worker thread)."""
    from .bridge import read_motion, read_skeleton

    s = settings_of(context)
    check_characters(s)
    reconform = s.method == 'RECONFORM'
    n = int(s.keyvert_count) if reconform else 0
    fs, fe = s.frame_range()
    # read the clip once: a lying-rest source's fitted body stands up from it too (as pipeline.retarget does)
    motion = read_motion(s.source, read_skeleton(s.source), action=s.action, frame_start=fs, frame_end=fe)
    src, src_t = prepare_role(s.source, s.bone_map('source') or None, n, fit_body=reconform, need_mesh=False,
                              action=s.action, frame_start=fs, frame_end=fe, motion=motion)
    tgt, tgt_t = prepare_role(s.target, s.bone_map('target') or None, n, fit_body=False, need_mesh=reconform)
    prep = Prepared(s.source.name, s.target.name, s.action.name if s.action else "", src, motion, tgt, None,
                    s.method, s.push_to_nla, result_action_name(s.source, s.target, s.action), keyvert_count=n)
    prep.to_transfer = [(s.source.name, src, bool(find_meshes_safe(s.source)))] if src_t else []
    if tgt_t:
        prep.to_transfer.append((s.target.name, tgt, True))
    return prep


def complete(prep: Prepared, say=lambda text: None) -> Prepared:
    """Pure core (any thread): transfer missing key vertices, copy rotations for the initial motion."""
    if getattr(prep, "to_transfer", None):
        from ..core.keyverts import transfer_keyverts

        for name, ch, storable in prep.to_transfer:
            say(f"Placing key vertices on '{name}'…")
            ch.keyverts = transfer_keyverts(ch, n=prep.keyvert_count)
            if storable:  # a fitted body has no mesh object to store on
                prep.transferred[name] = (ch, ch.keyverts)
        prep.to_transfer = []
    if prep.init_motion is None:
        from ..core.copy_rotations import copy_rotations

        say("Copying rotations…")
        prep.init_motion = copy_rotations(prep.source, prep.source_motion, prep.target)
    return prep


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

    terrain = getattr(job.settings, "terrain", None)
    stats = dict(getattr(job, "metrics", None) or {})
    # the source's labels are read above the floor the solve used (a level, or one per frame: core.ground)
    ground = getattr(job, "source_ground_level", None)
    if ground is None:
        ground = float(stats.get("source_ground", 0.0) or 0.0)
    m = dict(core_metrics.evaluate(job.source, source_motion, job.target, result, terrain, source_ground=ground))
    m.update({f"solver_{k}": v for k, v in stats.items()})
    ref = {}
    if with_reference:
        ref = core_metrics.evaluate(job.source, source_motion, job.target, init_motion, terrain,
                                    source_ground=ground)
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
    terms = get("terms") or (get("term_a"), get("term_b"))
    cos = get("cosine", get("cos", 0.0))
    frames = get("frames", ())
    if isinstance(frames, str):
        frames_text = frames
    elif frames is not None and len(frames) == 2:  # (first, last) span
        a, b = int(frames[0]), int(frames[1])
        frames_text = f"{a}-{b}" if b > a else f"{a}"
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


def slider_part_weights(s) -> dict:
    """{(body part, term): factor} from the conflict sliders (``core.conflicts.resolution_weights``; sliders
    left at 0.5 change nothing)."""
    from ..core.conflicts import Conflict, merge_part_weights, resolution_weights

    out = []
    for c in s.conflicts:
        if abs(c.balance - 0.5) < 1e-6:
            continue
        conflict = Conflict(c.body_part, c.term_a, c.term_b, c.cosine, c.severity, ())
        out.append(resolution_weights(conflict, c.balance))
    return merge_part_weights(*out)


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
    for arm_name, (ch, kvs) in getattr(prep_or_last, "transferred", {}).items():
        arm = bpy.data.objects.get(arm_name)
        if arm is not None:
            store_keyverts(arm, ch, kvs)
    if push_nla:
        push_to_nla(tgt_obj, act)
    s.last_action = act
    s.last_method = method
    if method == 'RECONFORM':
        if not outcome.reference and isinstance(prep_or_last, LastSolve):
            outcome.reference = prep_or_last.reference or {}
        s.set_metrics(outcome.metrics, outcome.reference)
        fill_conflicts(s, outcome.conflicts)
        if isinstance(prep_or_last, Prepared):
            _LAST[scene.name_full] = LastSolve(
                prep_or_last.source_obj_name, prep_or_last.target_obj_name, act.name, prep_or_last.source,
                prep_or_last.source_motion, prep_or_last.target, prep_or_last.init_motion, outcome.result,
                settings, iterations, outcome.seconds, job, outcome.reference)
        else:
            last = prep_or_last
            last.result, last.job, last.action_name, last.settings = outcome.result, job, act.name, settings
    else:
        s.metrics.clear()
        s.metrics_json = ""
        s.conflicts.clear()
        _LAST.pop(scene.name_full, None)
    return act


# ------------------------------------------------------------------------------------------------------------
# Bone maps
# ------------------------------------------------------------------------------------------------------------
class _RoleMixin:
    """Operators acting on one character (source or target) of the panel."""

    role: EnumProperty(name="Character", items=ROLE_ENUM, default='SOURCE')

    @classmethod
    def poll(cls, context):
        s = settings_of(context)
        return s.source is not None or s.target is not None

    def armature(self, context):
        return settings_of(context).character(self.role)

    def armature_or_report(self, context):
        """The role's armature, or None after reporting which one to pick."""
        arm = self.armature(context)
        if arm is None:
            self.report({'ERROR'}, f"No {self.role.lower()} armature: pick one in the Characters panel.")
        return arm


class RECONFORM_OT_detect_bone_map(_RoleMixin, bpy.types.Operator):
    """Detect which bone plays each canonical humanoid bone, from bone names and the hierarchy"""

    bl_idname = "reconform.detect_bone_map"
    bl_label = "Auto-Detect"
    bl_options = {'REGISTER', 'UNDO'}

    def execute(self, context):
        from ..core.bonemap import detect_bone_map
        from .bridge import read_skeleton

        s = settings_of(context)
        arm = self.armature_or_report(context)
        if arm is None:
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

        arm = self.armature_or_report(context)
        if arm is None:
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

        arm = self.armature_or_report(context)
        if arm is None:
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

    def execute(self, context):
        from ..core.keyverts import transfer_keyverts

        s = settings_of(context)
        arm = self.armature_or_report(context)
        if arm is None:
            return {'CANCELLED'}
        n = int(s.keyvert_count)
        try:
            ch, _ = prepare_role(arm, s.bone_map(self.role) or None, n, fit_body=False, need_mesh=True)
            locked = ch.keyverts if self.keep_locked else None
            kvs = transfer_keyverts(ch, n=n, locked=locked)
            if not store_keyverts(arm, ch, kvs):
                raise RuntimeError("The key-vertex storage (reconform_addon.keyverts) is not available.")
        except Exception as ex:  # noqa: BLE001
            self.report({'ERROR'}, _error_text(ex))
            return {'CANCELLED'}
        from . import gizmos

        gizmos.invalidate()
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
        if not self._same_scene(context):
            return
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
        _status_bar(context, f"ReConForM: {txt} ({frac * 100:.0f} %), Esc to cancel")
        _tag_redraw(context)

    _scene_ptr = None

    def _same_scene(self, context) -> bool:
        """False once another file was loaded (the scene we started in is gone)."""
        return self._scene_ptr is None or context.scene.as_pointer() == self._scene_ptr

    def _save_state(self, context):
        s = settings_of(context)
        self._saved = (s.progress, s.status)
        self._scene_ptr = context.scene.as_pointer()

    def _restore_state(self, context):
        if self._saved is not None and self._same_scene(context):
            s = settings_of(context)
            s.progress, s.status = self._saved

    def _cleanup(self, context):
        wm = context.window_manager
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
            self._timer = None
        wm.progress_end()
        _status_bar(context, None)
        _RUNNING.pop(context.scene.name_full, None)
        _tag_redraw(context)

    def cancel(self, context):
        """Blender cancels the modal operator (window closed, another file loaded): stop, write nothing."""
        self.cancel_run(context)

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
        if not self._same_scene(context):  # another file was loaded meanwhile: drop everything
            self.cancel_run(context)
            return {'CANCELLED'}
        for kind, payload in events:
            if kind == "progress":
                self._set_progress(context, payload)
            elif kind == "status":
                settings_of(context).status = payload
                _tag_redraw(context)
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
        # characters are checked in execute, so a click says what is missing instead of greying out
        return getattr(context.scene, "reconform", None) is not None and not is_running(context.scene)

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
            complete(prep)
            act = apply_outcome(context, prep, SolveOutcome(prep.init_motion), new_action_name=prep.new_action_name,
                                push_nla=prep.push_nla, method=prep.method)
            self._report_done(context, act, None)
            return None
        settings = s.solver_settings()
        self._settings = settings
        self._job = None

        def factory(say):
            complete(prep, say)
            say("Setting up the solver…")
            self._job = make_job(prep.source, prep.source_motion, prep.target, prep.init_motion, settings)
            return self._job

        return SolveRunner(factory, lambda j: finish_solve(j, prep.source, prep.source_motion, prep.target,
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
        from ..core.conflicts import merge_part_weights, resolve

        part_weights = merge_part_weights(getattr(last.settings, "part_weights", None), slider_part_weights(s))
        job = resolve(last.job, part_weights, fraction=s.warm_start_fraction)
        self._settings = job.settings
        self._last = last
        self._job = job
        return SolveRunner(job, lambda j: finish_solve(j, last.source, last.source_motion, last.target,
                                                       last.init_motion, with_reference=False))

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
            c.balance = 0.5
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


@bpy.app.handlers.persistent
def _cancel_runs_on_load(*_args):
    """A file is being loaded: stop every solve in flight (their results would have nowhere to go) and forget
    the cached last solves: they belong to the old file, and a Re-solve must not write into objects of the new
    file that happen to share a name with them."""
    _cancel_all_runs()
    _LAST.clear()


def _cancel_all_runs():
    """Cancel every solve in flight and forget them (a failing cancel does not stop the others)."""
    for r in list(_RUNNING.values()):
        try:
            r.cancel()
        except Exception:  # noqa: BLE001
            pass
    _RUNNING.clear()


def register():
    if _cancel_runs_on_load not in bpy.app.handlers.load_pre:
        bpy.app.handlers.load_pre.append(_cancel_runs_on_load)


def unregister():
    while _cancel_runs_on_load in bpy.app.handlers.load_pre:
        bpy.app.handlers.load_pre.remove(_cancel_runs_on_load)
    _cancel_all_runs()
    _LAST.clear()
