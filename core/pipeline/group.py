"""Several characters retargeted together (ReConForM §6.1), as one generator: the group twin of
``core.pipeline.retarget.Retarget``, which the panel, the batch command, the demo and the bench drive the same way.

    job = RetargetGroup([(source_1, motion_1, target_1), (source_2, motion_2, target_2)], options)
    for step in job.steps():          # Step(phase, fraction of the whole group, message, solver Progress)
        ...                           # job.cancel() from another thread stops it between steps
    outcome = job.outcome             # GroupOutcome: one core.pipeline.retarget.Outcome per pair, partner metrics, notes

The sources play in one world frame (a couple captured together, one file or several). Steps, in order:
1. characters: every source and target completed once (``retarget.complete_character``);
2. source tracks and copy-rotations per pair, then placed together (``core.pipeline.placement.place_together``: the
   targets keep the places their sources have relative to one another); with method 'copy_rotations' that
   placement is the result;
3. the joint solve (``solver.GroupSolveJob``): each pair's own terms plus the terms between characters and
   the gaze, one Adam step over every target's rotations and root per ``next()``;
4. metrics: each pair's own (``retarget.measuring``) and the partner metrics of the group
   (``core.metrics.partners.evaluating_partners``), of the result and of the placed copy-rotations, one phase
   that reports its progress;
5. conflicts per pair (``core.solver.conflicts``, on that pair's own terms).
With one pair every step is the single retarget's, and so is the result (tests/core/test_group.py).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace

import numpy as np

from ..solver.conflicts import detecting_group, merge_part_weights, resolve_group
from .copy_rotations import copy_rotations
from .placement import place_together
from ..errors import CoreError
from ..metrics.partners import evaluating_partners
from ..progress import drive, scaled
from .retarget import (METHODS, Cancellable, Outcome, RetargetOptions, Step, check_spec, complete_character,
                       measuring, phase_steps)
from ..solver import GroupSolveJob, SolveJob
from ..solver.settings import part_weights_from
from ..character.track import ClipTrack
from ..types import Motion

#: share of the whole group's progress bar each phase ends at
_PHASE_END = {"characters": 0.1, "copy_rotations": 0.14, "solve": 0.88, "metrics": 0.97, "conflicts": 1.0}


@dataclass
class GroupOutcome:
    """What a group retarget produced.

    Attributes:
        method: the method used.
        members: one ``core.pipeline.retarget.Outcome`` per pair, in the pairs' order (motion, copy-rotations
            placed with the group, characters, the pair's own metrics and conflicts, its SolveJob and source track).
        partner_metrics: ``evaluate_partners`` of the result (None with one pair or without metrics);
            partner_reference: the same for the placed copy-rotations ('reconform' only).
        notes: lines for the user; timings: seconds per phase; solver_stats: the joint solve's statistics.
        job: the GroupSolveJob ('reconform'), for conflicts and a re-solve (``RetargetGroup.resolving``);
        options: the RetargetOptions it ran with.
    """

    method: str
    members: list
    partner_metrics: dict = None
    partner_reference: dict = None
    notes: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    solver_stats: dict = field(default_factory=dict)
    job: GroupSolveJob = None
    options: RetargetOptions = None

    @property
    def motions(self) -> list:
        return [m.motion for m in self.members]


class RetargetGroup(Cancellable):
    """One retarget of several source→target pairs together (see the module docstring).

    Args:
        pairs: sequence of (source, source Motion, target): CharacterSpec or complete Character /
            BuiltCharacter, as ``core.pipeline.retarget.Retarget`` takes them; the source clips share one world frame,
            the same frame count and fps; every target appears once.
        options: RetargetOptions for the whole group (``init_motion`` / ``warm_start``: not per pair, use
            ``init_motions``).
        init_motions: optional list of copy-rotations results to reuse, one per pair (already placed together).
        source_tracks: optional list of the source clips' ClipTracks (None entries are built).
        part_weights: optional list, one per pair, of per-part term factors {(part, term): factor} (or None) for
            that pair's character, multiplied into the options' ``settings.part_weights`` (``merge_part_weights``):
            a batch set-up's per-character sliders; "partner" weighs the terms between the characters at that
            character's key vertices on the part.
    """

    def __init__(self, pairs, options: RetargetOptions = None, init_motions=None, source_tracks=None,
                 part_weights=None):
        self.options = options or RetargetOptions()
        self.pairs = [tuple(p) for p in pairs]
        if self.options.method not in METHODS:
            raise CoreError(f"Unknown method '{self.options.method}': use one of {', '.join(METHODS)}.")
        if not self.pairs:
            raise CoreError("Nothing to retarget: give at least one source→target pair.")
        if self.options.init_motion is not None or self.options.warm_start is not None:
            raise CoreError("A group retarget takes its initial motions per pair (init_motions), not in the options.")
        first = self.pairs[0][1]
        for src, mo, tgt in self.pairs:
            if mo.num_frames < 1:
                raise CoreError(f"The source clip of '{src.name}' has no frames: pick a frame range with at least "
                                "one frame.")
            if mo.num_frames != first.num_frames or abs(float(mo.fps) - float(first.fps)) > 1e-6:
                raise CoreError(f"'{src.name}' plays {mo.num_frames} frames at {mo.fps:g} fps but "
                                f"'{self.pairs[0][0].name}' plays {first.num_frames} at {first.fps:g}: characters "
                                "retargeted together must play the same frame range at the same frame rate.")
        names = [t.name for _, _, t in self.pairs]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise CoreError(f"Target '{dup[0]}' appears in two pairs: give each source its own target.")
        self.init_motions = init_motions
        self.source_tracks = source_tracks
        if part_weights is not None and len(part_weights) != len(self.pairs):
            raise CoreError(f"{len(part_weights)} sets of part weights for {len(self.pairs)} pairs: give one per pair "
                            "(None where a character has none).")
        #: each member's SolverSettings (the options' with that pair's part weights multiplied in)
        shared = self.options.settings
        self.member_settings = [shared if not pw else replace(shared, part_weights=merge_part_weights(
            part_weights_from(shared.part_weights), part_weights_from(pw)))
            for pw in (part_weights or [None] * len(self.pairs))]
        self._cancel = threading.Event()
        self.job = None
        self.outcome = None
        self._resolve = None     #: (the GroupOutcome re-solved, part weights per member, fraction): ``resolving``

    def steps(self):
        """Generator of Steps (``core.pipeline.retarget.Step``); returns the GroupOutcome (also ``self.outcome``), or None
        when cancelled."""
        if self._resolve is not None:
            return (yield from self._resolve_steps())
        o = self.options
        K = len(self.pairs)
        timings, notes = {}, []
        t0 = time.perf_counter()

        # 1. characters: every one checked first (milliseconds), then completed (seconds each)
        for src, _, tgt in self.pairs:
            for role, c in (("Source", src), ("Target", tgt)):
                check_spec(c, role, o)
        built = []
        todo = 2 * K
        for k, (src, _, tgt) in enumerate(self.pairs):
            pair = {}
            for r, (role, c) in enumerate((("source", src), ("target", tgt))):
                yield Step("characters", _PHASE_END["characters"] * (2 * k + r) / todo, f"Preparing {role} '{c.name}'…")
                pair[role] = complete_character(c, role, o)
                if self._cancel.is_set():
                    return None
                notes.extend(pair[role].notes)
            built.append(pair)
        timings["characters_s"] = time.perf_counter() - t0

        # 2. source tracks, copy-rotations, placed together
        t1 = time.perf_counter()
        yield Step("copy_rotations", _PHASE_END["characters"], "Copying rotations…")
        tracks, inits = [], []
        for k, ((_, mo, _), b) in enumerate(zip(self.pairs, built)):
            src = b["source"].character
            given = self.source_tracks[k] if self.source_tracks is not None else None
            ok = given is not None and given.character is src and (given.motion is mo or src.rig is not None)
            # the clip in the channels of the skeleton the core works on (core.rig.rehang: re-hung limb ends)
            tracks.append(given if ok else ClipTrack(src, mo if src.rig is None else src.rig.to_core(mo)))
            if self.init_motions is None:
                inits.append(copy_rotations(src, tracks[-1].motion, b["target"].character, tracks[-1],
                                            source_ground=self.member_settings[k].source_ground))
            if self._cancel.is_set():
                return None
        if self.init_motions is None:
            inits = place_together([(b["source"].character, tr.motion, tr, b["target"].character, init)
                                    for b, tr, init in zip(built, tracks, inits)])
        else:
            inits = list(self.init_motions)
        inits = [Motion(m.rotations, m.locations, mo.fps, mo.frame_start) for m, (_, mo, _) in zip(inits, self.pairs)]
        timings["copy_rotations_s"] = time.perf_counter() - t1

        yield from self._solve_and_measure(built, tracks, inits, timings, notes, t0)
        return self.outcome

    @classmethod
    def resolving(cls, last: GroupOutcome, part_weights: list, fraction: float = None) -> "RetargetGroup":
        """The warm-started re-solve of the finished group retarget ``last`` ('reconform') with per-part weights
        per member (``part_weights[k]``: {(part, term): factor} for ``last.members[k]``, the conflict sliders,
        ``core.solver.conflicts.resolve_group``) and ``fraction`` of the iterations: the same characters, source tracks
        and copy-rotations, its joint solve continued; then metrics (copy-rotations' kept from ``last``, not
        measured again) and conflicts. Its steps() returns a GroupOutcome as a first retarget's does."""
        if last.job is None or last.method != "reconform":
            raise CoreError("Only a finished ReConForM group retarget can be re-solved: retarget the group first.")
        options = replace(last.options or RetargetOptions(), baseline_metrics=False)
        job = cls([(m.source, m.source_track.motion, m.target) for m in last.members], options,
                  source_tracks=[m.source_track for m in last.members])
        job._resolve = (last, list(part_weights), fraction)
        return job

    def _resolve_steps(self):
        """steps() of a re-solve (``resolving``)."""
        last, part_weights, fraction = self._resolve
        t0 = time.perf_counter()
        yield Step("solve", _PHASE_END["copy_rotations"], "Setting up the re-solve…")
        job = resolve_group(last.job, part_weights, fraction)
        built = [m.built for m in last.members]
        tracks = [m.source_track for m in last.members]
        inits = [m.init_motion for m in last.members]
        yield from self._solve_and_measure(built, tracks, inits, {}, [], t0, job, last)
        return self.outcome

    def _measuring(self, built, tracks, motions, inits, grounds, members, notes, measured, last):
        """Step 4 as a generator of progress shares; returns (one Outcome per pair, partner metrics of the result,
        of copy-rotations), or (None, None, None) when cancelled: each pair's own metrics (``retarget.measuring``),
        then ``evaluating_partners`` of the result and of copy-rotations (a re-solve keeps ``last``'s)."""
        o = self.options
        reconform = o.method == "reconform"
        K = len(self.pairs)
        partners = measured and K > 1 and all(b[r].character.keyverts is not None for b in built
                                              for r in ("source", "target"))
        share = 1.0 / (K + (1 if partners else 0))           # of the phase: each pair, then the partner metrics
        outcomes = []
        for k, ((_, mo, _), b) in enumerate(zip(self.pairs, built)):
            src, tgt = b["source"].character, b["target"].character
            pair_notes = []
            metrics = reference = None
            if measured:
                metrics, reference = yield from scaled(
                    measuring(src, tracks[k].motion, tgt, motions[k], inits[k], o, grounds[k], tracks[k], pair_notes),
                    k * share, (k + 1) * share)
                if self._cancel.is_set():
                    return None, None, None
            if last is not None:           # a re-solve: copy-rotations is not measured again
                reference = last.members[k].reference
            outcomes.append(Outcome(o.method, motions[k], inits[k], src, tgt, b, metrics, reference, [], pair_notes,
                                    {}, members[k].metrics if members[k] is not None else {}, grounds[k], members[k],
                                    tracks[k]))
            notes.extend(pair_notes)
        partner = partner_ref = None
        if partners:
            sets = [[(b["target"].character, m) for b, m in zip(built, motions)]]
            if last is None and reconform and o.baseline_metrics:
                sets.append([(b["target"].character, m) for b, m in zip(built, inits)])
            found = yield from scaled(evaluating_partners(tracks, sets), K * share, 1.0)
            partner = found[0]
            partner_ref = last.partner_reference if last is not None else (found[1] if len(found) > 1 else None)
        return outcomes, partner, partner_ref

    def _solve_and_measure(self, built, tracks, inits, timings, notes, t0, job=None, last=None):
        """Steps 3 to 5 (sets ``self.outcome``): the joint solve (``job``, a re-solve's, or a new one), the
        metrics (copy-rotations' from ``last`` for a re-solve) and the conflicts."""
        o = self.options
        reconform = o.method == "reconform"
        K = len(self.pairs)
        motions, members, grounds, stats = inits, [None] * K, [0.0] * K, {}
        if reconform:
            t2 = time.perf_counter()
            if job is None:
                yield Step("solve", _PHASE_END["copy_rotations"], "Setting up the joint solver…")
                members = [SolveJob(b["source"].character, tr.motion, b["target"].character, init, settings,
                                    source_track=tr)
                           for b, init, tr, settings in zip(built, inits, tracks, self.member_settings)]
                job = GroupSolveJob(members, o.settings)
            self.job = job
            members = job.members
            if self._cancel.is_set():
                job.cancel()
            a, b_ = _PHASE_END["copy_rotations"], _PHASE_END["solve"]
            verb = "Re-solving" if last is not None else "Solving"
            for p in job.steps():
                yield Step("solve", a + (b_ - a) * p.fraction, f"{verb} {K} characters together {p.step + 1}/{p.total}",
                           p)
            if self._cancel.is_set() or not job.done:
                return None
            motions = [Motion(m.rotations, m.locations, mo.fps, mo.frame_start)
                       for m, (_, mo, _) in zip(job.results(), self.pairs)]
            grounds = [m.source_ground_level for m in members]
            notes.extend(job.notes)
            stats = job.metrics
            timings["solve_s"] = time.perf_counter() - t2
        for m, b in zip(motions, built):
            if not (np.isfinite(m.rotations).all() and np.isfinite(m.locations).all()):
                raise CoreError(f"Retarget onto '{b['target'].character.name}' produced non-finite values; nothing "
                                "written.")

        # 4. metrics: every pair's own, then the partner metrics of the result and of copy-rotations together (the
        # sources measured once), as one phase that reports its progress
        t3 = time.perf_counter()
        measured = o.metrics and all(b[r].character.mesh is not None and b[r].character.height
                                     for b in built for r in ("source", "target"))
        if o.metrics and not measured:
            notes.append("no metrics: a character has no body")
        gen = self._measuring(built, tracks, motions, inits, grounds, members, notes, measured, last)
        outcomes, partner, partner_ref = (
            (yield from phase_steps(gen, "metrics", _PHASE_END["solve"], _PHASE_END["metrics"], "Measuring the result"))
            if measured else drive(gen))
        if outcomes is None:
            return None
        if measured:
            timings["metrics_s"] = time.perf_counter() - t3

        # 5. conflicts of every member, its own terms and the terms between the characters (advice: a failure
        # never loses the result)
        if reconform and o.conflicts and not self._cancel.is_set():
            t4 = time.perf_counter()
            try:
                found = yield from phase_steps(detecting_group(self.job), "conflicts", _PHASE_END["metrics"],
                                               _PHASE_END["conflicts"], "Looking for conflicting terms")
            except CoreError as ex:
                found = None
                notes.append(f"conflicts not measured: {ex}")
            for out, conflicts in zip(outcomes, found or ()):
                out.conflicts = conflicts
            timings["conflicts_s"] = time.perf_counter() - t4
        if self._cancel.is_set():
            return None
        timings["total_s"] = time.perf_counter() - t0
        self.outcome = GroupOutcome(o.method, outcomes, partner, partner_ref, notes, timings, stats, self.job, o)
        yield Step("done", 1.0, "Done")
        return self.outcome


def run_group(job: RetargetGroup, on_step=None) -> GroupOutcome:
    """Drive ``job`` to the end on this thread (``on_step(step)`` sees each Step); returns its GroupOutcome."""
    for step in job.steps():
        if on_step is not None:
            on_step(step)
    if job.outcome is None:
        raise CoreError("The group retarget was cancelled: nothing was produced.")
    return job.outcome


__all__ = ["GroupOutcome", "RetargetGroup", "run_group"]
