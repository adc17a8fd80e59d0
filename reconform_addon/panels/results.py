"""The panels that show the result: Conflicts (ranked, the first few shown) and Metrics (beside copy-rotations')."""

from bpy.types import Panel, UIList

from .. import session
from ...core.metrics import report
from ...core.metrics.advice import floor_advice
from .common import _Base, wrapped_label


def metric_label(key: str) -> str:
    """'floor_pen_mean' -> 'Floor penetration, mean'; 'Hero: grounded_f1' (one target of several retargeted
    together) -> 'Hero: Grounded feet F1' (``core.metrics.report``: one list of names and units for the panel, the batch
    report and the demo; the panel prints the unit with each value)."""
    return report.info(key).label


def metric_rows(s) -> list:
    """[(label, result text, copy-rotations text or '', better: True/False/None)] for the Metrics panel, headline
    metrics first (``core.metrics.report``)."""
    values = {m.name: m.value for m in s.metrics}
    refs = {m.name: m.reference for m in s.metrics if m.has_reference} or None
    rows = []
    for r in report.metric_rows(values, refs):
        better = {"better": True, "worse": False, "lost": False}.get(r.change)
        rows.append((metric_label(r.info.key), report.format_value(r.info.key, r.value, short=True),
                     report.format_value(r.info.key, r.reference, short=True) if r.reference_text else "", better))
    return rows


def metrics_verdict(s) -> str:
    """The one-line verdict of the last retarget (``core.metrics.report.verdict``)."""
    values = {m.name: m.value for m in s.metrics}
    refs = {m.name: m.reference for m in s.metrics if m.has_reference} or None
    method = 'copy_rotations' if s.last_method == 'COPY_ROTATIONS' else 'reconform'
    return report.verdict(values, refs, method)


def conflict_text(c) -> str:
    """'left_arm: dist vs pen', prefixed by the character after a joint retarget ('Hero: left_arm: …')."""
    text = f"{c.body_part}: {c.term_a} vs {c.term_b}"
    return f"{c.character}: {text}" if c.character else text


SHOWN_CONFLICTS = 3


class RECONFORM_UL_conflicts(UIList):
    """Body part: term A vs term B | go to its frames | balance slider. The costliest first (severity ×
    duration); beyond the first few, rows are folded until Show All."""

    bl_idname = "RECONFORM_UL_conflicts"

    def draw_item(self, context, layout, data, item, icon, active_data, active_propname, index=0, flt_flag=0):
        row = layout.row(align=True)
        split = row.split(factor=0.55, align=True)
        split.label(text=conflict_text(item), icon='ERROR' if item.severity > 0.5 else 'INFO')
        sub = split.row(align=True)
        op = sub.operator("reconform.jump_to_conflict", text=str(item.first_frame), icon='TIME')
        op.frame = item.first_frame
        sub.prop(item, "balance", text="", slider=True)

    def filter_items(self, context, data, propname):
        items = getattr(data, propname)
        if data.show_all_conflicts:
            return [self.bitflag_filter_item] * len(items), []
        return [self.bitflag_filter_item if k < SHOWN_CONFLICTS else 0 for k in range(len(items))], []


class VIEW3D_PT_reconform_conflicts(_Base, Panel):
    bl_label = "Conflicts"
    bl_idname = "VIEW3D_PT_reconform_conflicts"
    bl_parent_id = "VIEW3D_PT_reconform"
    bl_options = {'DEFAULT_CLOSED'}

    @classmethod
    def poll(cls, context):
        s = getattr(context.scene, "reconform", None)
        return s is not None and (len(s.conflicts) > 0 or session.last_solve(context.scene) is not None)

    def draw(self, context):
        layout = self.layout
        s = context.scene.reconform
        if not len(s.conflicts):
            layout.label(text="No conflicting terms in the last solve", icon='CHECKMARK')
        else:
            layout.label(text="Costliest first (severity × duration); left favours the first term")
            layout.template_list("RECONFORM_UL_conflicts", "", s, "conflicts", s, "conflicts_index", rows=3)
            hidden = len(s.conflicts) - SHOWN_CONFLICTS
            if hidden > 0 or s.show_all_conflicts:
                layout.prop(s, "show_all_conflicts", text=f"Show All ({len(s.conflicts)})" if not
                            s.show_all_conflicts else "Show the Costliest Only", toggle=True)
            if 0 <= s.conflicts_index < len(s.conflicts):
                c = s.conflicts[s.conflicts_index]
                box = layout.box()
                box.label(text=conflict_text(c), icon='ERROR' if c.severity > 0.5 else 'INFO')
                box.progress(factor=c.severity, type='BAR', text=f"Severity {c.severity:.2f} (cos {c.cosine:+.2f}), "
                                                                 f"cost {c.score:.2f}")
                if c.frames:
                    row = box.row()
                    row.label(text=f"Frames: {c.frames}")
                    row.operator("reconform.jump_to_conflict", text="Go", icon='TIME').frame = c.first_frame
                box.prop(c, "balance", text=f"{c.term_a}  ⟷  {c.term_b}", slider=True)
        row = layout.row(align=True)
        row.operator("reconform.resolve", icon='FILE_REFRESH')
        row.operator("reconform.reset_conflicts", text="", icon='LOOP_BACK')
        layout.prop(s, "warm_start_fraction")


class VIEW3D_PT_reconform_metrics(_Base, Panel):
    bl_label = "Metrics"
    bl_idname = "VIEW3D_PT_reconform_metrics"
    bl_parent_id = "VIEW3D_PT_reconform"
    bl_options = {'DEFAULT_CLOSED'}

    @classmethod
    def poll(cls, context):
        s = getattr(context.scene, "reconform", None)
        return s is not None and len(s.metrics) > 0

    def draw(self, context):
        layout = self.layout
        s = context.scene.reconform
        wrapped_label(layout, metrics_verdict(s), icon='CHECKMARK')
        advice = floor_advice({m.name: m.value for m in s.metrics})
        if advice:
            wrapped_label(layout.box(), advice, icon='INFO')
        if s.last_ground:
            wrapped_label(layout, f"Ground: {s.last_ground}", icon='MESH_GRID')
        rows = metric_rows(s)
        has_ref = any(r[2] for r in rows)
        grid = layout.grid_flow(row_major=True, columns=3 if has_ref else 2, even_columns=False, align=True)
        grid.label(text="Metric")
        grid.label(text="Result")
        if has_ref:
            grid.label(text="Copy Rot.")
        for label, val, ref, better in rows:
            grid.label(text=label)
            icon = 'NONE' if better is None else ('TRIA_UP' if better else 'TRIA_DOWN')
            grid.label(text=val, icon=icon)
            if has_ref:
                grid.label(text=ref)
