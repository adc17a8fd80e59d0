"""Live (``reconform.live``): a toggle. On, the window around the current frame is retargeted in the background
as the artist scrubs, edits the source or changes the panel, and shown on the target (``reconform_addon.live``);
pressed again, Retarget, Re-solve or another file turns it off and puts the target back.

The operator is modal with a window timer: it passes every event through (the viewport stays fully usable)
and calls the scene's ``LiveController.tick`` with the current frame and the panel as it reads now (every
PANEL_READ_S) on each timer event; when the panel changed more than the solver settings, it starts Live again. Live
writes no undo step: the preview is temporary and goes away when Live ends.
"""

import time

import bpy

from .. import live
from .common import error_text, settings_of, tag_redraw
from .request import request_from_panel

#: seconds between two looks at the frame and the worker
TICK_S = 0.05
#: the panel is read again (for Live to follow its settings) at most this often, seconds
PANEL_READ_S = 0.25


class RECONFORM_OT_live(bpy.types.Operator):
    """Retarget the frames around the current frame in the background as you scrub or edit the source, and show
    them on the target (press again to stop: the target is put back as it was)"""

    bl_idname = "reconform.live"
    bl_label = "Live"

    _timer = None
    _scene_ptr = None

    @classmethod
    def poll(cls, context):
        return getattr(context.scene, "reconform", None) is not None

    def execute(self, context):
        self.report({'ERROR'}, "Live needs the viewport (it follows the frame you scrub to); in the background "
                               "use Retarget or the batch command's windows.")
        return {'CANCELLED'}

    def invoke(self, context, event):
        if bpy.app.background:
            return self.execute(context)
        scene = context.scene
        if live.stop(scene):          # pressed while on: off, target put back
            tag_redraw(context)
            return {'FINISHED'}
        s = settings_of(context)
        try:
            live.start(scene, request_from_panel(s), int(s.live_window))
        except Exception as ex:  # noqa: BLE001
            self.report({'ERROR'}, f"Live did not start: {error_text(ex)}")
            return {'CANCELLED'}
        self._scene_ptr = scene.as_pointer()
        wm = context.window_manager
        self._timer = wm.event_timer_add(TICK_S, window=context.window)
        wm.modal_handler_add(self)
        tag_redraw(context)
        return {'RUNNING_MODAL'}

    def modal(self, context, event):
        if event.type != 'TIMER':        # any timer of the window (ticking is cheap; Live debounces by time)
            return {'PASS_THROUGH'}
        c = live.controller(context.scene) if context.scene.as_pointer() == self._scene_ptr else None
        before = (c.status, c.solved) if c is not None else None
        alive = c is not None and c.tick(context.scene.frame_current, panel=self._panel(context))
        if alive and c.restart is not None:
            try:                           # the panel changed what Live was started with: start it again
                live.start(context.scene, *c.restart)
            except Exception as ex:  # noqa: BLE001 - the old Live is stopped and its target put back already
                live.stop(context.scene)
                self._end(context)
                self.report({'WARNING'}, f"Live stopped: {error_text(ex)}")
                tag_redraw(context)
                return {'FINISHED'}
            tag_redraw(context)
            return {'PASS_THROUGH'}
        if c is None or (c.status, c.solved) != before:
            tag_redraw(context)            # the panel's Live line and the target's new keys
        if alive:
            return {'PASS_THROUGH'}
        self._end(context)
        if c is not None and c.error:
            self.report({'WARNING'}, c.status)
        return {'FINISHED'}

    def _panel(self, context):
        """(RetargetRequest, window length) as the panel reads now, at most every PANEL_READ_S (Live follows it);
        None while it cannot be read (a half-picked character)."""
        now = time.perf_counter()
        if now - getattr(self, "_panel_at", -1e9) >= PANEL_READ_S:
            self._panel_at = now
            s = settings_of(context)
            try:
                self._panel_read = (request_from_panel(s), int(s.live_window))
            except Exception:  # noqa: BLE001 - Live keeps what it has until the panel reads again
                self._panel_read = None
        return getattr(self, "_panel_read", None)

    def cancel(self, context):
        """Blender ends the operator (window closed, file loaded): Live off, target put back."""
        if context.scene.as_pointer() == self._scene_ptr:
            live.stop(context.scene)
        self._end(context)

    def _end(self, context):
        if self._timer is not None:
            context.window_manager.event_timer_remove(self._timer)
            self._timer = None



classes = (RECONFORM_OT_live,)

