"""Live windows: the frames around the current frame retargeted in the background while an artist scrubs or
edits the source (the paper's online use, ReConForM §5.3.1: three-second batches; docs/solver.md "Live windows").

    live = LiveClip(source_spec, clip, target_spec, RetargetOptions(), length=75)
    setup = core.pipeline.retarget.run(live.prepare())     # once: characters, copy-rotations of the whole clip, floor
    window = core.pipeline.retarget.run(live.solve(frame))   # LiveWindow: the target on the frames around ``frame``
    live = live.edited(new_clip)                    # the source was edited: same characters, prepare() again

``prepare`` is ``core.pipeline.windows.clip_setup`` (what every window of a clip shares, as a windowed batch retarget
computes it); ``solve`` is ``core.pipeline.windows.window_job`` on the ``length`` frames centred on the frame (moved
inward at the clip's ends), started from the whole clip's copy-rotations on those frames: the same retarget a
windowed batch run makes of a window, so the preview is what the batch command gives for those frames (the
batch run's later windows also start from the previous window's horizontal position). ``solve(frame, previous)``
starts a window that shares most of its frames with the last one from it (``warm_start``): a fraction of the
steps, as Re-solve. Both are cancellable jobs with the ``steps()`` / ``outcome`` of ``core.pipeline.retarget.Retarget``,
so the add-on's worker runner drives them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import CoreError
from .retarget import Cancellable, RetargetOptions, Step, scene_channels
from ..rig.rotations_np import quat_conjugate, quat_multiply, quat_normalize
from ..solver import WarmSchedule
from ..types import Motion
from .windows import ClipSetup, clip_setup, crossfade_weight, hips_world, shifted, window_job

#: frames of a live window (the paper's three seconds at 25 fps)
LIVE_WINDOW = 75
#: the shortest window (the jerk and foot terms need a few frames)
MIN_WINDOW = 8
#: a window sharing at least this share of its frames with the last solved one starts from it (warm start)
WARM_OVERLAP = 0.5
#: a window started from the last one takes this share of the solver's iterations, at this share of its
#: learning rates (it starts near its optimum: at full rates Adam's first steps leave it; docs/solver.md "Live
#: windows")
WARM_FRACTION, WARM_LR = 0.15, 0.1
#: a Live window's re-solve from the last result: it starts nearer its optimum than a slider's re-solve
WARM = WarmSchedule(steps=WARM_FRACTION, lr=WARM_LR)
#: seconds over which a warm start fades out the last window's offset from copy-rotations (height, locations)
#: where the new window reaches past the last one: 8 frames at 30 fps, 32 at 120 (a fade over a fixed 8 frames
#: snaps at 120 fps, and the jerk budget charges the snap)
WARM_BLEND_S = 8 / 30


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
        skeleton: the target's skeleton as the scene has it (``core.pipeline.retarget.scene_channels``).
        seconds: wall time of its solve (set-up included).
        core_motion: the result in the core's channels (what a next window's warm start reads).
        warm: whether it started from the previous window (``LiveClip.warm_start``).
        relative: its objective at the last step over copy-rotations' (docs/solver.md "Reading the progress").
        setup: the ClipSetup it was solved on (a window of an edited clip is not a warm start for the new one).
        sixd: (T, Jo, 6) its solve's 6D rotation vectors (``SolveJob.result_sixd``: a next window's exact start).
    """

    start: int
    stop: int
    motion: Motion
    skeleton: object
    seconds: float
    core_motion: Motion = None
    warm: bool = False
    relative: float = float("nan")
    setup: object = field(default=None, repr=False, compare=False)
    sixd: object = field(default=None, repr=False, compare=False)


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
        """The job that sets the clip up (``core.pipeline.windows.clip_setup``); its outcome is the ClipSetup, also kept as
        ``self.setup`` (``baseline()`` then gives the whole clip's copy-rotations, what a preview shows outside
        the solved window)."""
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

    def solve(self, frame: int, previous: LiveWindow = None) -> Cancellable:
        """The job that retargets the window around scene frame ``frame``; its outcome is a LiveWindow. With the
        ``previous`` window of this set-up overlapping it by ``WARM_OVERLAP`` or more, the solve starts from it
        (``warm_start``: α held at 1, ``WARM_FRACTION`` of the steps at ``WARM_LR`` of the learning rates), as
        Re-solve starts from the last result; else from copy-rotations."""
        self._need_setup()
        a, b = self.window(frame)
        setup = self.setup
        warm = self.warm_start(a, b, previous) if previous is not None else None
        warm_sixd = self._warm_sixd(a, b, previous) if warm is not None else None

        def gen(job):
            t0 = time.perf_counter()
            first = self.source_motion.frame_start + a
            job.job = inner = window_job(setup, self.source_motion, self.options, a, b, warm_start=warm,
                                         warm_sixd=warm_sixd, warm_schedule=WARM)
            relative = float("nan")
            for s in inner.steps():
                if job.cancelled:
                    inner.cancel()
                    return None
                if s.solver is not None:
                    relative = s.solver.relative
                yield Step(s.phase, s.fraction, f"Live, frames {first}–{first + b - a - 1}: {s.message}", s.solver)
            if inner.outcome is None or job.cancelled:
                return None
            skeleton, motion = scene_channels(setup.target, inner.outcome.motion)
            return LiveWindow(a, b, motion, skeleton, time.perf_counter() - t0, inner.outcome.motion,
                              warm is not None, relative, setup, inner.outcome.job.result_sixd())
        return _Job(gen)

    def warm_start(self, a: int, b: int, previous: LiveWindow):
        """The start of window [a, b) from ``previous`` (core channels), or None when it is of another set-up or
        shares fewer than ``WARM_OVERLAP`` of the frames: the previous result on the shared frames; beyond them,
        copy-rotations moved horizontally to where the previous result leaves the hips at the shared frames'
        edge; what is left of the edge's offset (height, other bones' locations) and the solve's correction of
        each bone's rotation at the edge (copy-rotations' rotation⁻¹ · the result's, in the bone's own frame)
        carried on and faded out over ``WARM_BLEND_S`` (C²), so the pose goes on from the edge as
        copy-rotations moves. (Holding the edge pose instead while the hips go on makes planted feet slide;
        copy-rotations' rotations as they are jump at the edge: both start worse, docs/solver.md "Live
        windows".)"""
        pa, pb = previous.start, previous.stop
        lo, hi = max(a, pa), min(b, pb)
        if previous.setup is not self.setup or previous.core_motion is None or hi - lo < WARM_OVERLAP * (b - a):
            return None
        tgt, fps = self.setup.target, self.source_motion.fps
        base = self.setup.init.slice(a, b)
        prev = previous.core_motion
        rot, loc = base.rotations.copy(), base.locations.copy()
        rot[lo - a:hi - a], loc[lo - a:hi - a] = prev.rotations[lo - pa:hi - pa], prev.locations[lo - pa:hi - pa]
        blend = max(1, int(round(WARM_BLEND_S * fps)))                  # the fade's frames
        fade_all = 1.0 - crossfade_weight(blend)                        # 1 at the edge -> 0 (over WARM_BLEND_S)
        for edge, span in ((hi - 1, range(hi, b)), (lo, range(lo - 1, a - 1, -1))):   # after, then before
            if not len(span):
                continue
            pose = prev.slice(edge - pa, edge - pa + 1)
            off = hips_world(tgt, pose)[0] - hips_world(tgt, base.slice(edge - a, edge - a + 1))[0]
            off[2] = 0.0
            idx = np.asarray(span) - a                                  # outward from the edge
            part = shifted(tgt, Motion(base.rotations[idx], base.locations[idx], fps), off)
            gap = pose.locations[0] - shifted(tgt, base.slice(edge - a, edge - a + 1), off).locations[0]
            n = min(blend, len(idx))
            fade = fade_all[:n]
            rot[idx], loc[idx] = part.rotations, part.locations
            loc[idx[:n]] += fade[:, None, None] * gap                  # the edge's offset, faded out
            # the solve's correction of each bone at the edge (copy-rotations' rotation⁻¹ · the result's), carried
            # on over copy-rotations' next frames and faded out: the pose goes on from the edge without a jump
            corr = quat_multiply(quat_conjugate(base.rotations[edge - a]), pose.rotations[0])     # (J, 4)
            corr *= np.where(corr[:, :1] < 0.0, -1.0, 1.0)                                          # shorter arc
            ident = np.zeros_like(corr)
            ident[:, 0] = 1.0
            for k in range(n):
                q = quat_normalize(fade[k] * corr + (1.0 - fade[k]) * ident)
                rot[idx[k]] = quat_multiply(rot[idx[k]], q)
        return Motion(rot, loc, fps, base.frame_start)

    def edited(self, source_motion: Motion = None, settings=None) -> "LiveClip":
        """A LiveClip of the edited ``source_motion`` (default: the same clip) and/or other solver ``settings`` on
        the same complete characters (``prepare`` it again: the source track, copy-rotations and floor follow the
        clip and the settings; the characters and their key vertices do not)."""
        motion = self.source_motion if source_motion is None else source_motion
        options = self.options if settings is None else replace(self.options, settings=settings)
        if self.setup is None:
            return LiveClip(self.source, motion, self.target, options, self.length)
        if motion.rotations.shape[1:] != self.source_motion.rotations.shape[1:]:
            raise CoreError(f"The edited clip of '{self.setup.source.name}' has other bones: restart Live.")
        return LiveClip(self.setup.built["source"], motion, self.setup.built["target"], options, self.length)

    @staticmethod
    def _warm_sixd(a: int, b: int, previous: LiveWindow):
        """(b − a, Jo, 6) the previous solve's 6D vectors on the shared frames, NaN elsewhere (or None)."""
        if previous.sixd is None:
            return None
        lo, hi = max(a, previous.start), min(b, previous.stop)
        out = np.full((b - a,) + previous.sixd.shape[1:], np.nan)
        out[lo - a:hi - a] = previous.sixd[lo - previous.start:hi - previous.start]
        return out

    def _need_setup(self):
        if self.setup is None:
            raise CoreError("The live clip is not set up: run its prepare() job first.")


__all__ = ["LIVE_WINDOW", "LiveClip", "LiveWindow", "WARM", "WARM_BLEND_S", "WARM_FRACTION", "WARM_LR", "WARM_OVERLAP",
           "window_around"]
