"""Partners: more source→target pairs retargeted together with the panel's Source and Target (ReConForM §6.1).

The Partners list adds pairs (Add / Remove below); with "Retarget Partners Together" on, the panel's Retarget
(``retarget.RECONFORM_OT_retarget``) runs the group instead of the single pair: ``request_from_panel`` turns the
panel into a frozen ``GroupRequest``; ``start_group`` reads every pair on the main thread
(``pipeline_group.read_group_inputs``) and returns the ``core.pipeline.group.RetargetGroup`` the worker drives
(progress for the whole group, Esc cancels); ``apply_group`` writes one new Action per target in the FINISHED
path (``pipeline_group.write_group_outcome``: all or nothing, one undo step), fills the panel's metrics with
the partner metrics and every target's own, lists every character's conflicts (the terms between them as
"partner") and keeps the group for Re-solve (``start_group_resolve``: the sliders of each character's rows).
"""

from __future__ import annotations

from dataclasses import dataclass

import bpy

from .. import session
from ..bridge import BridgeError
from .common import Done, run, settings_of
from .common import check_characters, push_to_nla
from .conflicts import fill_group_conflicts, slider_part_weights
from .request import RetargetRequest, request_from_panel as pair_request


@dataclass(frozen=True)
class GroupRequest:
    """The panel's Retarget with partners, as plain values: the main pair's request and the partners'
    (source name, target name, action name or '', new Action name)."""

    main: RetargetRequest
    partners: tuple

    @property
    def method(self) -> str:
        return self.main.method


def group_requested(s) -> bool:
    """True when the panel's Retarget solves the partner pairs together with the main pair."""
    return bool(s.use_partners) and len(s.partners) > 0


def request_from_panel(s) -> GroupRequest:
    """The panel's settings ``s`` as a GroupRequest (checks every pair; needs torch)."""
    check_characters(s)
    main = pair_request(s)
    from .. import pipeline

    partners = []
    for k, it in enumerate(s.partners):
        if it.source is None or it.target is None:
            raise BridgeError(f"Partner pair {k + 1} has no {'source' if it.source is None else 'target'}: pick one, "
                              "or remove the pair.")
        for role, ob in (("source", it.source), ("target", it.target)):
            if ob.type != 'ARMATURE':
                raise BridgeError(f"Partner pair {k + 1}: {role} '{ob.name}' is not an armature.")
        partners.append((it.source.name, it.target.name, it.action.name if it.action else "",
                         pipeline.result_action_name(it.source, it.target, it.action)))
    return GroupRequest(main, tuple(partners))


def _pairs(req: GroupRequest) -> list:
    """[(source, target, action or None)] objects of the request, the main pair first."""
    m = req.main
    out = []
    for src_name, tgt_name, act_name in [(m.source_name, m.target_name, m.action_name)] + [p[:3] for p in req.partners]:
        src, tgt = bpy.data.objects.get(src_name), bpy.data.objects.get(tgt_name)
        if src is None or tgt is None:
            raise BridgeError("A character of this retarget was deleted or renamed; nothing was written.")
        act = bpy.data.actions.get(act_name) if act_name else None
        out.append((src, tgt, act))
    return out


def start_group(req: GroupRequest):
    """Main thread: read every pair; returns (pipeline_group.GroupInputs, the core RetargetGroup to drive)."""
    from ...core.pipeline.retarget import RetargetOptions
    from .. import pipeline_group

    pairs = _pairs(req)
    m = req.main
    bone_maps = [(m.source_bone_map, m.target_bone_map)] + [(None, None)] * len(req.partners)
    inputs = pipeline_group.read_group_inputs(pairs, method=m.method, frame_start=m.frame_start,
                                              frame_end=m.frame_end, bone_maps=bone_maps,
                                              keyvert_count=m.keyvert_count)
    options = RetargetOptions(method=m.method, keyvert_count=m.keyvert_count, settings=m.settings)
    return inputs, pipeline_group.make_group_job(inputs, options)


def panel_group_metrics(outcome) -> tuple:
    """(metrics, reference) for the panel: the partner metrics, then every target's own prefixed by its name
    ('Hero: grounded_f1'), and the joint solve's statistics as ``solver_*`` (hidden from the list)."""
    metrics = dict(outcome.partner_metrics or {})
    reference = dict(outcome.partner_reference or {})
    for member in outcome.members:
        name = member.target.name
        metrics.update({f"{name}: {k}": v for k, v in (member.metrics or {}).items()})
        reference.update({f"{name}: {k}": v for k, v in (member.reference or {}).items()})
    metrics.update({f"solver_{k}": v for k, v in (outcome.solver_stats or {}).items()})
    return metrics, reference


def apply_group(context, req: GroupRequest, inputs, outcome, report=None, resolved_from=None):
    """Main thread, FINISHED path only: a new Action per target (all or nothing), pushed to the NLA if asked, the
    panel's metrics and conflicts filled, the group remembered for Re-solve; returns the main target's new Action.
    ``report`` (a callable taking one line) gets the notes of the read (a clamped frame range) and of the write;
    ``resolved_from``: the LastGroupSolve this outcome re-solved (its Actions are named "… (re-solved)")."""
    from .. import pipeline_group

    s = settings_of(context)
    pairs = _pairs(req)
    suffix = " (re-solved)" if resolved_from is not None else ""
    names = [req.main.new_action_name + suffix] + [p[3] + suffix for p in req.partners]
    for inp in (inputs.pairs if report is not None and resolved_from is None else ()):
        for n in inp.notes:
            report(n)
    acts = pipeline_group.write_group_outcome([(src, tgt) for src, tgt, _ in pairs], outcome, names, report=report)
    if req.main.push_nla:
        for (_, tgt, _), act in zip(pairs, acts):
            push_to_nla(tgt, act)
    s.last_action = acts[0]
    s.last_method = 'RECONFORM' if req.method == 'reconform' else 'COPY_ROTATIONS'
    metrics, reference = panel_group_metrics(outcome)
    s.set_metrics(metrics, reference if req.method == 'reconform' else None)
    if req.method == 'reconform':
        # every character's conflicts in one ranking, "partner" naming the terms between them; the sliders feed
        # the group's Re-solve
        fill_group_conflicts(s, [(tgt.name, m.conflicts) for (_, tgt, _), m in zip(pairs, outcome.members)])
        iterations = resolved_from.iterations if resolved_from is not None else int(req.main.settings.iterations)
        session.remember(context.scene, session.LastGroupSolve(req, inputs, outcome, iterations,
                                                               float(outcome.timings.get("total_s", 0.0))))
    else:
        s.conflicts.clear()
        session.forget(context.scene)
    return acts[0]


def start_group_resolve(s, last):
    """The warm-started Re-solve of the joint retarget ``last`` (a LastGroupSolve) with the conflict sliders of
    ``s`` applied to each character (``core.pipeline.group.RetargetGroup.resolving``: the group's solve continued
    for the panel's share of its iterations, α held at 1)."""
    from ...core.solver.conflicts import merge_part_weights
    from ...core.pipeline.group import RetargetGroup

    names = [t.name for _, t, _ in _pairs(last.request)]
    part_weights = [merge_part_weights(m.settings.part_weights, slider_part_weights(s, name))
                    for m, name in zip(last.job.members, names)]
    return RetargetGroup.resolving(last.outcome, part_weights, float(s.warm_start_fraction))


# ------------------------------------------------------------------------------------------------------------
# The list's buttons
# ------------------------------------------------------------------------------------------------------------
def add_pair(s) -> Done:
    """Append an empty partner pair and make it the active row."""
    s.partners.add()
    s.partners_index = len(s.partners) - 1
    s.use_partners = True
    return Done()


def remove_pair(s):
    """Remove the active partner pair (None when the list is empty)."""
    if not len(s.partners):
        return None
    k = min(max(s.partners_index, 0), len(s.partners) - 1)
    s.partners.remove(k)
    s.partners_index = max(0, min(k, len(s.partners) - 1))
    return Done()


class RECONFORM_OT_partner_add(bpy.types.Operator):
    """Add a source -> target pair retargeted together with the main pair"""

    bl_idname = "reconform.partner_add"
    bl_label = "Add Partner Pair"
    bl_options = {'REGISTER', 'UNDO'}

    def execute(self, context):
        return run(self, add_pair, settings_of(context))


class RECONFORM_OT_partner_remove(bpy.types.Operator):
    """Remove the selected partner pair"""

    bl_idname = "reconform.partner_remove"
    bl_label = "Remove Partner Pair"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        s = getattr(context.scene, "reconform", None)
        return s is not None and len(s.partners) > 0

    def execute(self, context):
        return run(self, remove_pair, settings_of(context))


classes = (RECONFORM_OT_partner_add, RECONFORM_OT_partner_remove)
