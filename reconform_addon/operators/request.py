"""The panel's Retarget as plain values: ``RetargetRequest``, read from the panel on the main thread
(``request_from_panel``) and handed to the plain functions of ``retarget`` (one pair), ``partners`` (several
characters together) and ``live`` (the Live preview)."""

from __future__ import annotations

from dataclasses import dataclass

from .. import deps
from ..bridge import BridgeError
from .common import check_characters


@dataclass(frozen=True)
class RetargetRequest:
    """The panel's Retarget as plain values (what ``execute`` hands to the plain functions below)."""

    source_name: str
    target_name: str
    action_name: str            #: the source clip ('' for the one playing)
    frame_start: int            #: None for the clip's own range
    frame_end: int
    method: str                 #: 'reconform' | 'copy_rotations'
    keyvert_count: int
    settings: object            #: core.solver.SolverSettings
    push_nla: bool
    source_bone_map: dict       #: None: detected
    target_bone_map: dict
    new_action_name: str
    ground_name: str = ""       #: the object the target walks on ('' for the world floor z = 0)


def request_from_panel(s) -> RetargetRequest:
    """The panel's settings ``s`` as a RetargetRequest (checks the characters; needs torch)."""
    check_characters(s)
    ok, msg = deps.torch_status()
    if not ok:
        raise RuntimeError(f"PyTorch is missing ({msg}): the ReConForM panel shows how to install it.")
    from .. import pipeline   # imports torch: only when a retarget runs (enabling the add-on does not)

    method = 'reconform' if s.method == 'RECONFORM' else 'copy_rotations'
    fs, fe = s.frame_range()
    ground = ""
    if s.ground == 'OBJECT':
        if s.ground_object is None:
            raise BridgeError("Ground is set to Object but no object is picked: pick the mesh the target walks "
                              "on, or choose World Floor.")
        ground = s.ground_object.name
    return RetargetRequest(s.source.name, s.target.name, s.action.name if s.action else "", fs, fe, method,
                           int(s.keyvert_count), s.solver_settings(), bool(s.push_to_nla),
                           s.bone_map('source') or None, s.bone_map('target') or None,
                           pipeline.result_action_name(s.source, s.target, s.action), ground)
