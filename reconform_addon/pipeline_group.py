"""Several characters retargeted together on the Blender side (ReConForM §6.1): the group twin of
``pipeline``, for the panel's partner list, the batch command's several pairs, ``make demo`` and ``make bench``.

    inputs = read_group_inputs([(lead_src, lead_tgt, None), (follow_src, follow_tgt, None)], method=...)   # reads
    job = make_group_job(inputs, options)                  # core.pipeline.group.RetargetGroup; drive job.steps()
    actions = write_group_outcome(inputs, job.outcome, names)                 # one NEW Action per target

Every pair is read exactly as a single retarget reads it (``pipeline.read_inputs``: bone maps, stored key
vertices, a body fitted to a skeleton-only source), the sources in one world frame (one file or several),
all over the same frames. Writing is all or nothing over the targets: if one fails, the Actions already written
are removed and every target gets its previous Action back. ``retarget_group`` does the three in a row.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from ..core.solver.conflicts import ranked_across
from ..core.pipeline.retarget import RetargetOptions
from ..core.pipeline.group import GroupOutcome, RetargetGroup, run_group
from . import pipeline
from .run_report import conflict_rows, make_report, plain
from .setup_file import setup_bone_map, setup_options
from .bridge import BridgeError, bodyparts
from .bridge import keyverts as kv_storage
from .bridge import library
from .bridge.write import assignment_state, remove_action


@dataclass(frozen=True)
class GroupInputs:
    """What a group retarget reads from the scene: one ``pipeline.Inputs`` per pair, in order."""

    pairs: tuple

    @property
    def target_names(self) -> list:
        return [p.target_name for p in self.pairs]


@dataclass
class GroupResult:
    """What ``retarget_group`` produced: the new Actions (one per target, in the pairs' order), the written
    motions, the JSON-serialisable report and the core GroupOutcome."""

    actions: list
    motions: list
    report: dict = field(default_factory=dict)
    outcome: GroupOutcome = None


def check_pairs(pairs) -> None:
    """BridgeError when the pairs (source, target, ...) cannot be solved together: an armature missing, a target
    in two pairs, or an armature that is the target of one pair and the source of another."""
    if not pairs:
        raise BridgeError("No source→target pair to retarget: add at least one.")
    targets = [p[1] for p in pairs]
    for src, tgt, *_ in pairs:
        if src is None or tgt is None:
            raise BridgeError("A partner pair has no source or no target armature: pick both, or remove the pair.")
    names = [t.name for t in targets]
    for n in names:
        if names.count(n) > 1:
            raise BridgeError(f"Armature '{n}' is the target of two pairs: give each pair its own target.")
    sources = {p[0].name for p in pairs}
    both = sorted(sources & set(names))
    if both:
        raise BridgeError(f"Armature '{both[0]}' is both a source and a target: a target receives a new motion, so "
                          "it cannot play a source clip in the same retarget.")


def read_group_inputs(pairs, *, method: str = "reconform", frame_start=None, frame_end=None,
                      bone_maps=None, keyvert_count: int = 41, setup=None) -> GroupInputs:
    """Read every pair (main thread; reads only). ``pairs``: sequence of (source armature, target armature,
    source Action or None); ``bone_maps``: optional sequence of (source bone map, target bone map) per pair;
    ``setup``: a set-up (``setup_file.load_setup``) whose "source" / "target" entries choose the meshes of each
    body ("meshes", "exclude_meshes"), as for a single retarget; a name counts for the armatures of its role that
    move such a mesh (``bodyparts.setup_choices``)."""
    check_pairs(pairs)
    setup = setup or {}
    src_meshes = bodyparts.setup_choices(setup.get("source"), [p[0] for p in pairs])
    tgt_meshes = bodyparts.setup_choices(setup.get("target"), [p[1] for p in pairs])
    out = []
    for k, (src, tgt, action) in enumerate(pairs):
        sbm, tbm = (bone_maps[k] if bone_maps is not None else (None, None))
        out.append(pipeline.read_inputs(src, tgt, method=method, action=action, frame_start=frame_start,
                                        frame_end=frame_end, source_bone_map=sbm, target_bone_map=tbm,
                                        keyvert_count=keyvert_count,
                                        source_meshes=src_meshes[k], target_meshes=tgt_meshes[k]))
    first = out[0].source_motion
    for inp in out[1:]:
        mo = inp.source_motion
        if mo.num_frames != first.num_frames or abs(mo.fps - first.fps) > 1e-6:
            raise BridgeError(f"'{inp.source_name}' plays {mo.num_frames} frames at {mo.fps:g} fps but "
                              f"'{out[0].source_name}' plays {first.num_frames} at {first.fps:g}: characters "
                              "retargeted together must play the same frames; set one frame range for all.")
    return GroupInputs(tuple(out))


def make_group_job(inputs: GroupInputs, options: RetargetOptions, part_weights=None) -> RetargetGroup:
    """The core group retarget of ``inputs`` (pure core: drive it in any thread); ``part_weights``: optional per-pair
    term factors (``RetargetGroup``)."""
    return RetargetGroup([(p.source, p.source_motion, p.target) for p in inputs.pairs], options,
                         part_weights=part_weights)


def write_group_outcome(objects, outcome: GroupOutcome, names, *, store_keyverts: bool = True, report=None) -> list:
    """Main thread: ``pipeline.write_outcome`` for every pair (one NEW Action per target, assigned with its slot,
    then the key vertices the retarget transferred). All or nothing: every target is checked before the first
    write, and when a write fails, the Actions written so far are removed, the targets get their previous Actions
    and bone modes back, the stored key vertices are restored, and the error is raised.

    Args:
        objects: sequence of (source armature, target armature) per pair, in the outcome's order.
        names: the new Actions' names, one per pair.
        report: a callable taking one line (key vertices that could not be stored).
    """
    for _, tgt in objects:
        blocker = library.animation_blocker(tgt)
        if blocker:
            raise BridgeError(blocker)
    saved = kv_storage.snapshot([arm for pair in objects for arm in pair])
    written = []     # (target, action, its assignment before)
    try:
        for (src, tgt), member, name in zip(objects, outcome.members, names):
            previous = assignment_state(tgt)
            act = pipeline.write_outcome(tgt, member, name, source_obj=src, store_keyverts=store_keyverts,
                                         report=report)
            written.append((tgt, act, previous))
    except Exception:
        for tgt, act, previous in reversed(written):
            remove_action(tgt, act, previous)
        kv_storage.restore(saved)
        raise
    return [w[1] for w in written]


def make_group_report(inputs: GroupInputs, outcome: GroupOutcome, action_names, timings: dict) -> dict:
    """The JSON-serialisable report of a group retarget: one single-retarget report per pair (``pairs``, with the
    per-part term factors its character was solved with, ``part_weights``, where it had any), the partner metrics of
    the result and of copy-rotations, the joint solve's statistics, notes and timings."""
    pairs = [make_report(inp, member, name, {}) for inp, member, name in zip(inputs.pairs, outcome.members,
                                                                                      action_names)]
    for rep in pairs:
        rep.pop("timings", None)
        rep.pop("metrics_solver", None)
    # every character's conflicts in one ranking, as the panel lists them (each pair's own list is in its report)
    merged = ranked_across([(p["target"]["armature"], m.conflicts) for p, m in zip(pairs, outcome.members)])
    conflicts = [dict(character=name, **row) for (name, _), row in zip(merged, conflict_rows([c for _, c in merged]))]
    rep = {
        "method": outcome.method, "characters": len(pairs), "pairs": pairs, "conflicts": plain(conflicts),
        "partner_metrics": plain(outcome.partner_metrics),
        "partner_reference_metrics": plain(outcome.partner_reference),
        "timings": {k: round(v, 4) for k, v in timings.items()},
        "notes": [n for inp in inputs.pairs for n in inp.notes] + list(outcome.notes),
    }
    if outcome.job is not None:
        rep["metrics_solver"] = plain({k: v for k, v in outcome.solver_stats.items() if k != "final_terms"})
    json.dumps(rep, allow_nan=False)  # must stay strict JSON for --report
    return rep


def retarget_group(pairs, method: str = "reconform", frame_start=None, frame_end=None, settings=None, setup=None,
                   names=None, bone_maps=None, report=None, progress=None, store_keyverts: bool = True,
                   part_weights=None) -> GroupResult:
    """Retarget several pairs together as NEW Actions, one per target (read, the core group generator, write:
    the path the panel's Retarget takes with partners).

    Args:
        pairs: sequence of (source armature, target armature, source Action or None), sources in one world frame.
        method, frame_start, frame_end, settings, setup, report, progress, store_keyverts: as ``pipeline.retarget``.
        names: the new Actions' names (default '<source clip> to <target>' each).
        bone_maps: optional (source bone map, target bone map) per pair; else the set-up's, else detected.
        part_weights: optional per pair {(part, term): factor} or None, multiplied into the settings' own
            (``core.pipeline.group.RetargetGroup``; a set-up's ``characters`` entries).
    Raises:
        BridgeError (bad input, one line) or CoreError; nothing is written then.
    """
    say = report or (lambda msg: None)
    tick = progress or (lambda f: None)
    setup = setup or {}
    t0 = time.perf_counter()
    check_pairs(pairs)
    if bone_maps is None:
        bone_maps = [(setup_bone_map(setup, "source", s.name), setup_bone_map(setup, "target", t.name))
                     for s, t, _ in pairs]
    say("reading " + ", ".join(f"'{s.name}' -> '{t.name}'" for s, t, _ in pairs))
    inputs = read_group_inputs(pairs, method=method, frame_start=frame_start, frame_end=frame_end,
                               bone_maps=bone_maps, keyvert_count=int(setup.get("keyvert_count", 41)), setup=setup)
    mo = inputs.pairs[0].source_motion
    say(f"{len(pairs)} characters together: {mo.num_frames} frames from {mo.frame_start} at {mo.fps:g} fps")
    timings = {"read_s": time.perf_counter() - t0}
    job = make_group_job(inputs, setup_options(method, settings, setup), part_weights)
    outcome = run_group(job, pipeline.step_reporter(say, tick))
    for n in outcome.notes:
        say(n)
    timings.update(outcome.timings)
    names = list(names) if names else [None] * len(pairs)
    names = [n or pipeline.result_action_name(s, t, a) for n, (s, t, a) in zip(names, pairs)]
    objects = [(s, t) for s, t, _ in pairs]
    rep = make_group_report(inputs, outcome, names, timings)   # before the write: nothing can fail after it

    def note(msg):
        say(msg)
        rep["notes"].append(msg)
    t3 = time.perf_counter()
    acts = write_group_outcome(objects, outcome, names, store_keyverts=store_keyverts, report=note)
    for pair_rep, act in zip(rep["pairs"], acts):
        pair_rep["action"] = act.name          # Blender adds .001 when the name is taken
    rep["timings"]["write_s"] = round(time.perf_counter() - t3, 4)
    rep["timings"]["total_s"] = round(time.perf_counter() - t0, 4)
    tick(1.0)
    for (s, t), act in zip(objects, acts):
        say(f"wrote Action '{act.name}' on '{t.name}' ({outcome.members[0].motion.num_frames} frames)")
    return GroupResult(acts, outcome.motions, rep, outcome)


__all__ = ["GroupInputs", "GroupResult", "check_pairs", "make_group_job", "make_group_report", "read_group_inputs",
           "retarget_group", "write_group_outcome"]
