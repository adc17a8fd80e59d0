"""Live: the window around the current frame retargeted in the background while the artist scrubs or edits the
source, shown on the target (docs/user_guide.md "Live"; the core side is ``core.pipeline.live``).

The target shows a temporary preview Action (``bridge.preview``): copy-rotations of the whole clip, with the
window around the current frame replaced by its solve. A ``LiveController`` per scene does the main-thread
part: it reads the scene once (``pipeline.read_inputs``, as Retarget does), hands ``core.pipeline.live.LiveClip``'s
jobs to a worker thread (``session.SolveRunner``: the set-up, then one window at a time) and, on every
``tick`` (the Live operator's timer), writes what the worker finished, cancels a window the artist has scrubbed
away from, starts the window around the current frame once the frame has stayed put for ``DEBOUNCE_S``, and
re-reads the source clip after an edit (the ``depsgraph_update_post`` handler reports edits of the source's
Action). Turning Live off, Retarget, Re-solve, an error or loading another file put the target back as it was
and delete the preview; after an undo that removed the preview, Live stops. Nothing here runs torch on the main
thread; ``core`` is imported when Live starts.
"""

from __future__ import annotations

import time
from dataclasses import replace

import bpy

from . import handlers, session
from .bridge import BridgeError, preview
from .bridge.animation import read_motion
from .bridge.read import read_skeleton
from .bridge.write import overwrite_keys
from .operators.common import error_text

#: seconds the current frame (or the source) must stay unchanged before a window is started
DEBOUNCE_S = 0.15

#: {scene name_full: LiveController}
_LIVE: dict = {}
#: {scene name_full: why Live ended} (shown in the panel until Live starts again)
_ENDED: dict = {}


def controller(scene):
    """The scene's LiveController, or None."""
    return _LIVE.get(scene.name_full)


def is_live(scene) -> bool:
    return scene.name_full in _LIVE


def status(scene) -> str:
    """The panel's Live line: what Live is doing, or why it ended ('' when it is off)."""
    c = _LIVE.get(scene.name_full)
    return c.status if c is not None else _ENDED.get(scene.name_full, "")


class LiveController:
    """The Live preview of one scene (main thread; see the module docstring).

    ``request``: the panel's ``operators.retarget.RetargetRequest`` ('reconform' method); ``length``: frames of a
    window. ``start()`` reads the scene and starts the set-up; ``tick(frame)`` drives it (returns False once
    Live has ended: stopped, or failed with ``error`` set); ``source_edited()`` marks the source clip changed;
    ``stop()`` ends it and puts the target back.
    """

    def __init__(self, scene, request, length: int):
        self.scene_key = scene.name_full
        self.request, self.length = request, int(length)
        self.clip = None                # core.pipeline.live.LiveClip
        self.runner = None              # session.SolveRunner in flight
        self.kind = None                # 'prepare' | 'window'
        self.window = None              # (start, stop) of the window in flight
        self.shown = None               # (start, stop) of the window written into the preview
        self.baseline = None            # (skeleton, copy-rotations of the whole clip) in the preview
        self.status = "Live: starting…"
        self.error = None
        self.alive = True
        self.solved = 0                 # windows written
        self.last_window = None         # the last core.pipeline.live.LiveWindow written (the next may start there)
        self._frame, self._frame_at = None, 0.0
        self._edited_at = None
        self._pending_settings = None   # the panel's solver settings, changed since Live started, not applied yet
        self._restart_since = None      # (what else changed in the panel, since when)
        self.restart = None             # (RetargetRequest, window length) Live is to be started again with

    # ----------------------------------------------------------------------------------------------------
    def start(self):
        """Main thread: read the scene (fails fast with BridgeError) and start the clip's set-up."""
        from ..core.pipeline.live import LiveClip
        from ..core.pipeline.retarget import RetargetOptions
        from . import pipeline

        req = self.request
        if req.method != 'reconform':
            raise BridgeError("Live solves the ReConForM method: set Method to ReConForM.")
        src, tgt = self._objects()
        action = bpy.data.actions.get(req.action_name) if req.action_name else None
        ground = bpy.data.objects.get(req.ground_name) if req.ground_name else None
        inputs = pipeline.read_inputs(src, tgt, method=req.method, action=action, frame_start=req.frame_start,
                                      frame_end=req.frame_end, source_bone_map=req.source_bone_map,
                                      target_bone_map=req.target_bone_map, keyvert_count=req.keyvert_count,
                                      ground=ground)
        options = RetargetOptions(method=req.method, keyvert_count=req.keyvert_count, settings=req.settings,
                                  ground=inputs.ground)
        self.action_name = inputs.source_action
        self.clip = LiveClip(inputs.source, inputs.source_motion, inputs.target, options, self.length)
        self._run('prepare', self.clip.prepare())
        _LIVE[self.scene_key] = self
        self.status = "Live: preparing the characters…"

    def source_edited(self):
        """The source's Action changed (the depsgraph handler): re-read the clip once it settles."""
        self._edited_at = time.perf_counter()

    def tick(self, frame: int, now: float = None, panel=None) -> bool:
        """Main thread, every timer event: see the class docstring. ``panel``: (RetargetRequest, window length)
        as the panel reads now, or None: new solver settings set the clip up again once they settle (as a source
        edit does); a change of anything else Live was started with (characters, clip, range, method, key
        vertices, bone maps, ground, window) sets ``restart`` to the new pair once it settles, for the operator
        to start Live again with it. Returns False once Live has ended."""
        if not self.alive:
            return False
        now = time.perf_counter() if now is None else now
        try:
            self._drain()
            if not self.alive:
                return False
            self._objects()
            if self._frame != frame:
                self._frame, self._frame_at = frame, now
            if panel is not None and self._wants_restart(panel, now):
                return True
            settings = None if panel is None else panel[0].settings
            if settings is not None and settings != (self._pending_settings or self.request.settings):
                self._pending_settings = None if settings == self.request.settings else settings
                self._edited_at = now
            if self._edited_at is not None:
                if self.runner is not None:
                    self.runner.cancel()
                elif now - self._edited_at >= DEBOUNCE_S:
                    self._edited_at = None
                    self._reread()
                return True
            if self.clip.setup is None:
                return True
            want = self.clip.window(frame)
            if self.runner is not None:
                if self.kind == 'window' and self.window != want:
                    self.runner.cancel()            # scrubbed away: its result would be for the wrong frames
                return True
            if want != self.shown and now - self._frame_at >= DEBOUNCE_S:
                self.window = want
                self._run('window', self.clip.solve(frame, self.last_window))
        except Exception as ex:  # noqa: BLE001 - Live ends and says why; the target is put back
            self.fail(ex)
            return False
        return True

    def _wants_restart(self, panel, now: float) -> bool:
        """True while the panel's request differs from Live's in more than its solver settings (a window in flight
        is cancelled meanwhile); ``restart`` is set once the difference has stayed the same for DEBOUNCE_S."""
        key = _restart_key(*panel)
        if key == _restart_key(self.request, self.length):
            self._restart_since = None
            return False
        if self._restart_since is None or self._restart_since[0] != key:
            self._restart_since = (key, now)
        if self.runner is not None:
            self.runner.cancel()
        if now - self._restart_since[1] >= DEBOUNCE_S:
            self.restart = panel
        return True

    def stop(self, restore: bool = True):
        """End Live: cancel the worker and (``restore``) put the target back, deleting the preview."""
        self.alive = False
        if self.runner is not None:
            self.runner.cancel()
            self.runner = None
        if _LIVE.get(self.scene_key) is self:
            del _LIVE[self.scene_key]
        if restore:
            tgt = bpy.data.objects.get(self.request.target_name)
            if tgt is not None:
                preview.restore(tgt)
        if self.error is None:
            self.status = ""

    def fail(self, ex):
        self.error = error_text(ex) if isinstance(ex, Exception) else str(ex)
        self.stop()
        self.status = _ENDED[self.scene_key] = f"Live stopped: {self.error}"

    # ----------------------------------------------------------------------------------------------------
    def _objects(self):
        src = bpy.data.objects.get(self.request.source_name)
        tgt = bpy.data.objects.get(self.request.target_name)
        if src is None or tgt is None:
            raise BridgeError("A character of the live preview was deleted or renamed: Live stopped.")
        return src, tgt

    def _run(self, kind, job):
        self.kind = kind
        self.runner = session.SolveRunner(job, lambda j: j.outcome)
        self.runner.start()

    def _drain(self):
        if self.runner is None:
            return
        for kind, payload in self.runner.events():
            if kind == "progress":
                self.status = f"Live: {payload.message}"
            elif kind == "status":
                self.status = f"Live: {payload}"
            elif kind == "cancelled":
                self.runner, self.window = None, None
            elif kind == "error":
                ex, tb = payload
                print(tb)
                self.runner = None
                self.fail(ex)
                return
            elif kind == "done":
                self.runner = None
                if self.kind == 'prepare':
                    self._show_baseline()
                else:
                    self._show_window(payload)

    def _show_baseline(self):
        """Write copy-rotations of the whole clip into the preview (a new one, or the existing one in place)."""
        skeleton, motion = self.clip.baseline()
        _, tgt = self._objects()
        act = preview.preview_action(tgt)
        same = (act is not None and self.baseline is not None
                and self.baseline[1].num_frames == motion.num_frames
                and self.baseline[1].frame_start == motion.frame_start)
        if same:
            overwrite_keys(tgt, act, skeleton, motion)
        else:
            act = preview.write_preview(tgt, skeleton, motion, f"{tgt.name} Live preview")
        self.baseline, self.shown = (skeleton, motion), None
        self._refresh(tgt, act)
        self.status = "Live: ready (copy-rotations until the window around the frame is solved)"

    def _show_window(self, win):
        _, tgt = self._objects()
        act = preview.preview_action(tgt)
        if act is None:
            raise BridgeError(f"The live preview on '{tgt.name}' was removed (an undo?): Live stopped.")
        if self.shown is not None:           # the last window back to copy-rotations
            a, b = self.shown
            overwrite_keys(tgt, act, self.baseline[0], self.baseline[1].slice(a, b))
        overwrite_keys(tgt, act, win.skeleton, win.motion)
        self.shown, self.window = (win.start, win.stop), None
        self.solved += 1
        self.last_window = win
        self._refresh(tgt, act)
        f0 = win.motion.frame_start
        how = " (from the last window)" if win.warm else ""
        self.status = f"Live: frames {f0}–{f0 + win.motion.num_frames - 1} solved in {win.seconds:.2f} s{how}"

    def _reread(self):
        """The source clip read again after an edit, and the panel's new solver settings taken; the set-up restarts
        on the same characters (a window of other settings is not a start for the next one)."""
        src, _ = self._objects()
        req = self.request
        settings, self._pending_settings = self._pending_settings, None
        action = bpy.data.actions.get(self.action_name) if self.action_name else None
        motion = read_motion(src, read_skeleton(src), action=action, frame_start=req.frame_start,
                             frame_end=req.frame_end)
        old = self.clip.source_motion
        if (settings is None and motion.num_frames == old.num_frames and motion.frame_start == old.frame_start
                and (motion.rotations == old.rotations).all() and (motion.locations == old.locations).all()):
            if self.clip.setup is None:       # nothing the retarget reads changed, but the set-up was stopped
                self._run('prepare', self.clip.prepare())
            return
        if settings is not None:
            self.request = replace(req, settings=settings)
            self.last_window = None
        self.clip = self.clip.edited(motion, settings)
        self.shown = None
        self._run('prepare', self.clip.prepare())
        self.status = (f"Live: the {'settings' if settings is not None else 'source'} changed, setting up "
                       "again…")

    @staticmethod
    def _refresh(tgt, act):
        """Make the viewport evaluate the edited keys now (not at the next frame change)."""
        act.update_tag()
        tgt.update_tag(refresh={'TIME'})


#: what Live was started with apart from the solver settings (RetargetRequest fields): a change restarts it
RESTART_FIELDS = ("source_name", "target_name", "action_name", "frame_start", "frame_end", "method",
                  "keyvert_count", "source_bone_map", "target_bone_map", "ground_name")


def _restart_key(request, length: int) -> tuple:
    return tuple(getattr(request, f) for f in RESTART_FIELDS) + (int(length),)


# ------------------------------------------------------------------------------------------------------------
def start(scene, request, length: int) -> LiveController:
    """Start Live in ``scene`` (stopping any earlier one there); returns its controller."""
    stop(scene)
    _ENDED.pop(scene.name_full, None)
    c = LiveController(scene, request, length)
    c.start()
    return c


def stop(scene, restore: bool = True) -> bool:
    """Stop Live in ``scene`` (the target put back); False when it was not on."""
    c = _LIVE.get(scene.name_full)
    if c is None:
        return False
    c.stop(restore)
    return True


def stop_all(restore: bool = True):
    for c in list(_LIVE.values()):
        c.stop(restore)
    _LIVE.clear()
    _ENDED.clear()


@bpy.app.handlers.persistent
def _on_depsgraph_update(scene, depsgraph):
    c = _LIVE.get(scene.name_full)
    if c is None or not c.action_name:
        return
    for u in depsgraph.updates:
        idb = getattr(u.id, "original", u.id)
        if isinstance(idb, bpy.types.Action) and idb.name == c.action_name:
            c.source_edited()
            return


@bpy.app.handlers.persistent
def _on_load_pre(*_args):
    stop_all(restore=False)          # the old file's objects are going away


@bpy.app.handlers.persistent
def _on_load_post(*_args):
    preview.restore_all()            # a file saved while Live was on opens with its targets as they were


@bpy.app.handlers.persistent
def _on_undo(*_args):
    for c in list(_LIVE.values()):   # an undo that removed the preview ends Live (nothing left to restore)
        tgt = bpy.data.objects.get(c.request.target_name)
        if tgt is None or preview.preview_action(tgt) is None:
            c.error = "an undo removed the preview"
            c.stop(restore=tgt is not None)
            c.status = _ENDED[c.scene_key] = "Live stopped: an undo removed the preview"


def _handlers():
    h = bpy.app.handlers
    return ((h.depsgraph_update_post, _on_depsgraph_update), (h.load_pre, _on_load_pre),
            (h.load_post, _on_load_post), (h.undo_post, _on_undo), (h.redo_post, _on_undo))


def register():
    handlers.add(_handlers())


def unregister():
    handlers.remove(_handlers())
    stop_all()
