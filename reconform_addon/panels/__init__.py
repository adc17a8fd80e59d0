"""The "ReConForM" tab of the 3D viewport's sidebar (N-panel). Panels only draw; operators do the work.

Layout: ReConForM (characters, clip, PyTorch status) > Partners (more pairs solved together) > Bone Map > Meshes >
Key Vertices > Solver (> Advanced) > Retarget (button, progress, status) > Conflicts > Metrics; one module per
stage: ``setup``, ``solve``, ``results`` (``common``: what they share). ``classes`` registers them in that order.
"""

from .common import CATEGORY, wrapped_label
from .results import (SHOWN_CONFLICTS, RECONFORM_UL_conflicts, VIEW3D_PT_reconform_conflicts,
                      VIEW3D_PT_reconform_metrics, conflict_text, metric_label, metric_rows, metrics_verdict)
from .setup import (RECONFORM_UL_bone_map, RECONFORM_UL_partners, VIEW3D_PT_reconform, VIEW3D_PT_reconform_bone_map,
                    VIEW3D_PT_reconform_keyverts, VIEW3D_PT_reconform_meshes, VIEW3D_PT_reconform_partners,
                    draw_meshes, role_header)
from .solve import VIEW3D_PT_reconform_run, VIEW3D_PT_reconform_solver, VIEW3D_PT_reconform_solver_advanced, draw_ground

classes = (
    RECONFORM_UL_bone_map,
    RECONFORM_UL_conflicts,
    RECONFORM_UL_partners,
    VIEW3D_PT_reconform,
    VIEW3D_PT_reconform_partners,
    VIEW3D_PT_reconform_bone_map,
    VIEW3D_PT_reconform_meshes,
    VIEW3D_PT_reconform_keyverts,
    VIEW3D_PT_reconform_solver,
    VIEW3D_PT_reconform_solver_advanced,
    VIEW3D_PT_reconform_run,
    VIEW3D_PT_reconform_conflicts,
    VIEW3D_PT_reconform_metrics,
)

__all__ = ["CATEGORY", "SHOWN_CONFLICTS", "classes", "conflict_text", "draw_ground", "draw_meshes", "metric_label",
           "metric_rows", "metrics_verdict", "role_header", "wrapped_label"] + [c.__name__ for c in classes]
