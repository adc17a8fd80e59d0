"""Retarget and Re-solve: the panel's run, its orchestration and its modal driver.

Retarget (``reconform.retarget``) and Re-solve (``reconform.resolve``) are modal in the UI. ``execute`` turns
the panel into a frozen ``RetargetRequest``; the scene is read into arrays on the main thread
(``pipeline.read_inputs``); the ``core.pipeline.retarget.Retarget`` generator — the one the batch command, the demo and
the bench drive — runs in a worker thread (``session.SolveRunner``: characters completed, copy-rotations, the solve,
metrics, conflicts); a window timer drains its steps into the panel's progress bar and the status bar; Esc
cancels. Nothing is written to bpy data before the FINISHED return (``pipeline.write_outcome``; one undo step
removes the new Action); a cancelled or failed run leaves the scene as it was. ``execute()`` runs the same work
synchronously (background mode, tests).
"""

import time
import traceback
from dataclasses import replace

import bpy

from .. import live, session
from ..bridge import BridgeError
from ..session import LastGroupSolve, LastSolve, SolveRunner, is_running, last_solve
from .common import error_text, push_to_nla, settings_of, tag_redraw
from .conflicts import fill_conflicts, slider_part_weights
from .request import RetargetRequest, request_from_panel


def _status_bar(context, text):
    """Show ``text`` in the window's status bar (None restores it); silently skipped without a workspace."""
    ws = getattr(context, "workspace", None)
    if ws is not None and hasattr(ws, "status_text_set"):
        try:
            ws.status_text_set(text)
        except Exception:  # noqa: BLE001 - cosmetic only
            pass


# ------------------------------------------------------------------------------------------------------------
# Orchestration: the panel's run as plain values, read on the main thread, solved anywhere (the same core
# generator as the batch command, through ``pipeline``), written on the main thread in the FINISHED path
# ------------------------------------------------------------------------------------------------------------
def _objects(req) -> tuple:
    src, tgt = bpy.data.objects.get(req.source_name), bpy.data.objects.get(req.target_name)
    if src is None or tgt is None:
        raise BridgeError("The characters of this retarget were deleted or renamed; nothing was written.")
    return src, tgt


def start_retarget(req: RetargetRequest):
    """Main thread: read the scene for ``req``; returns (pipeline.Inputs, the core Retarget job to drive)."""
    from ...core.pipeline.retarget import RetargetOptions
    from .. import pipeline

    src, tgt = _objects(req)
    action = bpy.data.actions.get(req.action_name) if req.action_name else None
    ground = bpy.data.objects.get(req.ground_name) if req.ground_name else None
    if req.ground_name and ground is None:
        raise BridgeError(f"Ground object '{req.ground_name}' was deleted or renamed: pick it again.")
    inputs = pipeline.read_inputs(src, tgt, method=req.method, action=action, frame_start=req.frame_start,
                                  frame_end=req.frame_end, source_bone_map=req.source_bone_map,
                                  target_bone_map=req.target_bone_map, keyvert_count=req.keyvert_count,
                                  ground=ground)
    options = RetargetOptions(method=req.method, keyvert_count=req.keyvert_count, settings=req.settings)
    return inputs, pipeline.make_job(inputs, options)


def start_resolve(s, last: LastSolve):
    """The warm-started Re-solve of ``last`` with the conflict sliders of ``s`` applied (a core Retarget job on
    the last solve's characters, copy-rotations and source track; α held at 1, a share of the iterations,
    continuing the last solve's optimiser)."""
    from ...core.solver import CONTINUE, WarmSchedule
    from ...core.solver.conflicts import merge_part_weights
    from ...core.pipeline.retarget import Retarget

    outcome = last.outcome
    part_weights = merge_part_weights(last.options.settings.part_weights, slider_part_weights(s))
    settings = replace(last.options.settings, part_weights=part_weights)
    options = replace(last.options, settings=settings, init_motion=outcome.init_motion, warm_start=outcome.motion,
                      continue_schedule=WarmSchedule(steps=float(s.warm_start_fraction), lr=CONTINUE.lr),
                      warm_sixd=outcome.job.result_sixd() if outcome.job is not None else None,
                      warm_state=outcome.job.optim if outcome.job is not None else None, warm_job=outcome.job,
                      baseline_metrics=False,   # the first solve's terrain, as sampled (its report kept on it)
                      ground=outcome.terrain if outcome.terrain is not None else last.options.ground)
    return Retarget(outcome.built["source"], last.inputs.source_motion, outcome.built["target"], options,
                    source_track=outcome.source_track)


def panel_metrics(outcome) -> dict:
    """The metrics the panel shows (and keeps in ``metrics_json``): the result's, plus the solver's statistics
    as ``solver_*`` (hidden from the list)."""
    m = dict(outcome.metrics or {})
    m.update({f"solver_{k}": v for k, v in (outcome.solver_stats or {}).items()})
    return m


def apply_result(context, req: RetargetRequest, inputs, outcome, *, options=None, resolved_from=None,
                 report=None):
    """Main thread, FINISHED path only: write the Action (and the key vertices the retarget placed), push it to
    the NLA if asked, fill the panel's metrics and conflicts, remember the solve for Re-solve. ``report`` (a
    callable taking one line) gets the notes of the read (a clamped frame range) and of the write."""
    from ...core.pipeline.retarget import RetargetOptions
    from .. import pipeline

    s = settings_of(context)
    src, tgt = _objects(req)
    name = req.new_action_name + (" (re-solved)" if resolved_from is not None else "")
    for n in (inputs.notes if resolved_from is None and report is not None else ()):
        report(n)
    act = pipeline.write_outcome(tgt, outcome, name, source_obj=src, report=report)
    if req.push_nla:
        push_to_nla(tgt, act)
    s.last_action = act
    s.last_method = 'RECONFORM' if req.method == 'reconform' else 'COPY_ROTATIONS'
    s.last_ground = outcome.ground.line() if outcome.ground is not None else "World Floor (z = 0)"
    if req.method == 'reconform':
        reference = outcome.reference if resolved_from is None else resolved_from.outcome.reference
        s.set_metrics(panel_metrics(outcome), reference)
        fill_conflicts(s, outcome.conflicts)
        iterations = resolved_from.iterations if resolved_from is not None else int(req.settings.iterations)
        session.remember(context.scene, LastSolve(
            req.source_name, req.target_name, act.name, req, inputs, outcome,
            options if options is not None else RetargetOptions(method=req.method, keyvert_count=req.keyvert_count,
                                                                 settings=req.settings),
            iterations, float(outcome.timings.get("total_s", 0.0))))
        if resolved_from is not None:     # keep the first solve's reference (copy-rotations is not re-measured)
            session.last_solve(context.scene).outcome.reference = reference
    else:
        if outcome.metrics:       # copy-rotations measured too (both characters have a body)
            s.set_metrics(panel_metrics(outcome))
        else:
            s.metrics.clear()
            s.metrics_json = ""
        s.conflicts.clear()
        session.forget(context.scene)
    return act


# ------------------------------------------------------------------------------------------------------------
# Retarget and Re-solve
# ------------------------------------------------------------------------------------------------------------
class _SolveModalBase:
    """Shared modal machinery: worker thread, timer, progress, Esc, write on FINISHED only."""

    _runner = None
    _timer = None
    _saved = None

    # subclasses: self._start(context) -> runner; self._apply(context, outcome) -> action
    def _set_progress(self, context, step):
        """One core.pipeline.retarget.Step (a phase line, or a solver step with its relative objective) into the panel and
        status bar."""
        if not self._same_scene(context):
            return
        s = settings_of(context)
        frac = float(getattr(step, "fraction", 0.0))
        s.progress = frac
        txt = str(getattr(step, "message", "")) or "Solving"   # the solver's lines carry its relative objective
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
        live.stop(context.scene)      # Live's preview goes; the target is put back before the run reads it
        try:
            runner = self._start(context)
        except Exception as ex:  # noqa: BLE001
            self._restore_state(context)
            self.report({'ERROR'}, error_text(ex))
            return {'CANCELLED'}
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
        s.status = f"Wrote {self._written(act)} in {took:.1f} s"
        self.report({'INFO'}, s.status)

    _runner_started = None

    def _written(self, act) -> str:
        """What the run wrote, for the status line."""
        return f"'{act.name}'"

    def run_sync(self, context):
        """The whole run on this thread (execute path)."""
        self._save_state(context)
        self._runner_started = time.perf_counter()
        live.stop(context.scene)
        try:
            runner = self._start(context)
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

    _group = None

    def _start(self, context):
        from . import partners

        self._runner_started = time.perf_counter()
        s = settings_of(context)
        self._group = None
        if partners.group_requested(s):     # the partner pairs solved together with this one (ReConForM §6.1)
            self._group = req = partners.request_from_panel(s)
            self._inputs, job = partners.start_group(req)
        else:
            self._req = req = request_from_panel(s)
            self._inputs, job = start_retarget(req)
        self._options = job.options
        return SolveRunner(job, lambda j: j.outcome)   # copy-rotations too: its metrics take a while on long clips

    def _apply(self, context, outcome):
        report = lambda msg: self.report({'WARNING'}, msg)       # noqa: E731
        if self._group is not None:
            from . import partners
            return partners.apply_group(context, self._group, self._inputs, outcome, report=report)
        return apply_result(context, self._req, self._inputs, outcome, options=self._options, report=report)

    def _written(self, act) -> str:
        if self._group is None:
            return _SolveModalBase._written(self, act)
        return f"{len(self._group.partners) + 1} Actions ('{act.name}', …)"


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
        from . import partners

        last = last_solve(context.scene)
        if last is None:
            raise RuntimeError("Nothing to re-solve: run Retarget first.")
        self._runner_started = time.perf_counter()
        self._last = last
        if isinstance(last, LastGroupSolve):      # partners retargeted together: the group is re-solved
            job = partners.start_group_resolve(settings_of(context), last)
        else:
            job = start_resolve(settings_of(context), last)
        self._options = job.options
        return SolveRunner(job, lambda j: j.outcome)

    def _apply(self, context, outcome):
        last = self._last
        if isinstance(last, LastGroupSolve):
            from . import partners
            return partners.apply_group(context, last.request, last.inputs, outcome,
                                        report=lambda msg: self.report({'WARNING'}, msg), resolved_from=last)
        return apply_result(context, last.request, last.inputs, outcome, options=self._options, resolved_from=last)

    def _written(self, act) -> str:
        if not isinstance(self._last, LastGroupSolve):
            return _SolveModalBase._written(self, act)
        return f"{len(self._last.request.partners) + 1} Actions ('{act.name}', …)"


classes = (
    RECONFORM_OT_retarget,
    RECONFORM_OT_resolve,
)
