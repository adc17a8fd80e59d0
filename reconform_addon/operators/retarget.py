"""Retarget and Re-solve (and the preset button): the panel's run, its orchestration and its modal driver.

Retarget (``reconform.retarget``) and Re-solve (``reconform.resolve``) are modal in the UI: inputs are read
into numpy on the main thread, ``core.solver.SolveJob.steps()`` runs in a worker thread (``session.SolveRunner``),
a window timer drains its queue into the panel's progress bar and the status bar, Esc cancels. Nothing is
written to bpy data before the FINISHED return (one undo step removes the new Action); a cancelled or failed
run leaves the scene as it was. ``execute()`` runs the same work synchronously (background mode, batch, tests).

The orchestration (``prepare``, ``complete``, ``prepare_role``, ``make_job``, ``finish_solve``,
``apply_outcome``, ``Prepared``, ``SolveOutcome`` and the operators' ``_start`` / ``_apply``) lives here, in one
place.
"""

import time
import traceback
from dataclasses import dataclass, field

import bpy

from .. import deps, session
from ..bridge import keyverts as kvstore
from ..session import LastSolve, SolveRunner, is_running, last_solve
from .common import error_text, settings_of, tag_redraw
from .conflicts import fill_conflicts, slider_part_weights


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
    from ..bridge import BridgeError

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
# Orchestration: inputs read on the main thread, solved anywhere, written on the main thread
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


def prepare_role(arm, bone_map, n: int, *, fit_body: bool, need_mesh: bool, action=None, frame_start=None,
                 frame_end=None, motion=None):
    """(Character, needs_transfer): skeleton, mesh, bone map, height and the key vertices stored on the
    character when there are any (``n`` of them). Reads only; main thread. ``action``/``frame_start``/
    ``frame_end`` name the clip a fitted body stands up from, ``motion`` that clip when already read (see
    ``pipeline.prepare_character``)."""
    from .. import pipeline

    ch = pipeline.prepare_character(arm, bone_map=bone_map, keyvert_count=0, need_mesh=need_mesh,
                                    fit_body=fit_body, action=action, frame_start=frame_start,
                                    frame_end=frame_end, motion=motion)
    if ch.mesh is None or not n:
        return ch, False
    from ...core.keyverts import character_height

    ch.height = float(character_height(ch))
    ch.keyverts = kvstore.load(arm, ch, n)
    return ch, ch.keyverts is None


def find_meshes_safe(arm):
    from ..bridge import find_meshes

    try:
        return find_meshes(arm)
    except Exception:  # noqa: BLE001
        return []


def prepare(context) -> Prepared:
    """Read everything the solve needs from the scene (main thread). Reads only, writes nothing.

    Heavy pure-core work (key-vertex transfer, copy-rotations) is left to ``complete`` (worker thread)."""
    from ..bridge import read_motion, read_skeleton

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
        from ...core.keyverts import transfer_keyverts

        for name, ch, storable in prep.to_transfer:
            say(f"Placing key vertices on '{name}'…")
            ch.keyverts = transfer_keyverts(ch, n=prep.keyvert_count)
            if storable:  # a fitted body has no mesh object to store on
                prep.transferred[name] = (ch, ch.keyverts)
        prep.to_transfer = []
    if prep.init_motion is None:
        from ...core.copy_rotations import copy_rotations

        say("Copying rotations…")
        prep.init_motion = copy_rotations(prep.source, prep.source_motion, prep.target)
    return prep


def make_job(source, source_motion, target, init_motion, settings, warm_start=None):
    from ...core.solver import SolveJob

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
    from ...core import metrics as core_metrics

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
        from ...core.conflicts import detect_conflicts

        conflicts = list(detect_conflicts(job))
    except Exception:  # noqa: BLE001 - conflicts are advice; a failure must not lose the result
        traceback.print_exc()
    out = SolveOutcome(result, m, ref, conflicts)
    out.seconds = time.perf_counter() - t0
    return out



def apply_outcome(context, prep_or_last, outcome: SolveOutcome, *, new_action_name: str, push_nla: bool,
                  method: str, settings=None, job=None, iterations: int = 0):
    """Main thread, FINISHED path only: write the Action, fill metrics and conflicts, remember the solve."""
    from ..bridge import BridgeError, write_motion

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
            kvstore.store(arm, ch, kvs)
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
            session.remember(scene, LastSolve(
                prep_or_last.source_obj_name, prep_or_last.target_obj_name, act.name, prep_or_last.source,
                prep_or_last.source_motion, prep_or_last.target, prep_or_last.init_motion, outcome.result,
                settings, iterations, outcome.seconds, job, outcome.reference))
        else:
            last = prep_or_last
            last.result, last.job, last.action_name, last.settings = outcome.result, job, act.name, settings
    else:
        s.metrics.clear()
        s.metrics_json = ""
        s.conflicts.clear()
        session.forget(scene)
    return act


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
        tag_redraw(context)

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
        session.untrack(context.scene)
        tag_redraw(context)

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
            self.report({'ERROR'}, error_text(ex))
            return {'CANCELLED'}
        if runner is None:  # finished synchronously (copy rotations)
            return {'FINISHED'}
        self._runner = runner
        session.track(context.scene, runner)
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
                tag_redraw(context)
            elif kind == "cancelled":
                self.cancel_run(context)
                return {'CANCELLED'}
            elif kind == "error":
                ex, tb = payload
                print(tb)
                self.cancel_run(context)
                self.report({'ERROR'}, f"Retarget failed, nothing was written: {error_text(ex)}")
                return {'CANCELLED'}
            elif kind == "done":
                self._cleanup(context)
                try:
                    act = self._apply(context, payload)
                except Exception as ex:  # noqa: BLE001
                    self._restore_state(context)
                    self.report({'ERROR'}, error_text(ex))
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
            self.report({'ERROR'}, error_text(ex))
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
        from ...core.conflicts import merge_part_weights, resolve

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
            from ..bridge import BridgeError

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


classes = (
    RECONFORM_OT_retarget,
    RECONFORM_OT_resolve,
    RECONFORM_OT_apply_preset,
)
