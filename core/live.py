"""Live windows: the frames around the current frame retargeted in the background while an artist scrubs or
edits the source (the paper's online use, ReConForM §5.3.1: three-second batches; docs/solver.md "Live").

    live = LiveClip(source_spec, clip, target_spec, RetargetOptions(), length=75)
    setup = core.retarget.run(live.prepare())     # once: characters, copy-rotations of the whole clip, floor
    window = core.retarget.run(live.solve(frame))   # LiveWindow: the target on the frames around ``frame``
    live = live.edited(new_clip)                    # the source was edited: same characters, prepare() again

``prepare`` is ``core.windows.clip_setup`` (what every window of a clip shares, as a windowed batch retarget
computes it); ``solve`` is ``core.windows.window_job`` on the ``length`` frames centred on the frame (moved
inward at the clip's ends), started from the whole clip's copy-rotations on those frames: the same retarget a
windowed batch run makes of a window, so the preview is what the batch command gives for those frames (the
batch run's later windows also start from the previous window's horizontal position). Both are cancellable jobs
with the ``steps()`` / ``outcome`` of ``core.retarget.Retarget``, so the add-on's worker runner drives them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace

from .errors import CoreError
from .retarget import Cancellable, RetargetOptions, Step, scene_channels
from .types import Motion
from .windows import ClipSetup, clip_setup, window_job

#: frames of a live window (the paper's three seconds at 25 fps)
LIVE_WINDOW = 75
#: the shortest window (the jerk and foot terms need a few frames)
MIN_WINDOW = 8


def window_around(index: int, length: int, num_frames: int) -> tuple:
    """(start, stop) clip indices of the ``length`` frames centred on ``index`` (0-based), moved inward so that
    they stay within 0..num_frames; the whole clip when it is shorter."""
    if num_frames <= length:
        return 0, num_frames
    index = min(max(int(index), 0), num_frames - 1)
    a = min(max(index - length // 2, 0), num_frames - length)
    return a, a + length


@dataclass(frozen=True)
class LiveWindow:
    """One solved live window.

    Attributes:
        start, stop: clip indices of its frames [start, stop).
        motion: the result on those frames in the scene's channels of the target (``skeleton``), its
            ``frame_start`` the scene frame of ``start``.
        skeleton: the target's skeleton as the scene has it (``core.retarget.scene_channels``).
        seconds: wall time of its solve (set-up included).
    """

    start: int
    stop: int
    motion: Motion
    skeleton: object
    seconds: float


class _Job(Cancellable):
    """A cancellable job around a generator of Steps whose return value becomes ``outcome``."""

    def __init__(self, make):
        self._make = make
        self._cancel = threading.Event()

    def steps(self):
        value = yield from self._make(self)
        if value is not None and not self._cancel.is_set():
            self.outcome = value
        return self.outcome


class LiveClip:
    """The live preview of one clip from ``source`` onto ``target`` (see the module docstring).

    Args:
        source, target: CharacterSpec (completed by ``prepare``), or complete Characters / BuiltCharacters.
        source_motion: the source clip (scene channels, never modified).
        options: RetargetOptions ('reconform'); metrics, conflicts, warm start and a given copy-rotations are
            not used (a window is solved from the whole clip's copy-rotations).
        length: frames of a window.
    """

    def __init__(self, source, source_motion: Motion, target, options: RetargetOptions = None,
                 length: int = LIVE_WINDOW):
        options = options or RetargetOptions()
        if options.method != "reconform":
            raise CoreError("Live windows solve the 'reconform' method: copy-rotations has nothing to solve.")
        if int(length) < MIN_WINDOW:
            raise CoreError(f"A live window of {length} frames is too short: use at least {MIN_WINDOW} frames.")
        if source_motion.num_frames < 1:
            raise CoreError("The live source clip has no frames: pick a frame range with at least one frame.")
        self.source, self.target, self.source_motion = source, target, source_motion
        self.options = replace(options, metrics=False, baseline_metrics=False, conflicts=False, init_motion=None,
                               warm_start=None)
        self.length = int(length)
        self.setup: ClipSetup = None

    @property
    def num_frames(self) -> int:
        return self.source_motion.num_frames

    def window(self, frame: int) -> tuple:
        """(start, stop) clip indices of the window around scene frame ``frame``."""
        return window_around(int(frame) - self.source_motion.frame_start, self.length, self.num_frames)

    def prepare(self) -> Cancellable:
        """The job that sets the clip up (``core.windows.clip_setup``); its outcome is the ClipSetup, also kept as
        ``self.setup``. ``baseline`` of it: the whole clip's copy-rotations in the scene's channels
        (``baseline()``), what a preview shows outside the solved window."""
        def gen(job):
            setup = yield from clip_setup(self.source, self.source_motion, self.target, self.options, job._cancel)
            if setup is not None and not job.cancelled:
                self.setup = setup
            return setup
        return _Job(gen)

    def baseline(self) -> tuple:
        """(the target's scene skeleton, copy-rotations of the whole clip in its channels); after ``prepare``."""
        self._need_setup()
        return scene_channels(self.setup.target, self.setup.init)

    def solve(self, frame: int) -> Cancellable:
        """The job that retargets the window around scene frame ``frame``; its outcome is a LiveWindow."""
        self._need_setup()
        a, b = self.window(frame)

        def gen(job):
            t0 = time.perf_counter()
            first = self.source_motion.frame_start + a
            job.job = inner = window_job(self.setup, self.source_motion, self.options, a, b)
            for s in inner.steps():
                if job.cancelled:
                    inner.cancel()
                    return None
                yield Step(s.phase, s.fraction, f"Live, frames {first}–{first + b - a - 1}: {s.message}", s.solver)
            if inner.outcome is None or job.cancelled:
                return None
            skeleton, motion = scene_channels(self.setup.target, inner.outcome.motion)
            return LiveWindow(a, b, motion, skeleton, time.perf_counter() - t0)
        return _Job(gen)

    def edited(self, source_motion: Motion) -> "LiveClip":
        """A LiveClip of the edited ``source_motion`` on the same complete characters (``prepare`` it again:
        the source track, copy-rotations and floor follow the clip; the characters do not)."""
        if self.setup is None:
            return LiveClip(self.source, source_motion, self.target, self.options, self.length)
        if source_motion.rotations.shape[1:] != self.source_motion.rotations.shape[1:]:
            raise CoreError(f"The edited clip of '{self.setup.source.name}' has other bones: restart Live.")
        return LiveClip(self.setup.built["source"], source_motion, self.setup.built["target"], self.options,
                        self.length)

    def _need_setup(self):
        if self.setup is None:
            raise CoreError("The live clip is not set up: run its prepare() job first.")


__all__ = ["LIVE_WINDOW", "LiveClip", "LiveWindow", "window_around"]
