"""What the operator modules share: the panel's settings, the source/target role, one-line reports.

Each operator's ``execute`` turns its properties into a frozen options object and hands it to a plain function
of its module (``bone_map.detect(settings, BoneMapOptions(...))``), which does the work, raises ``BridgeError`` /
``CoreError`` (or anything else) on failure and returns a ``Done`` line; ``run`` turns that into the report and
the return set (the ``anim_utils.BakeOptions`` + ``bake_action_objects`` pattern of Blender's bl_operators).
"""

from __future__ import annotations

from dataclasses import dataclass

import bpy
from bpy.props import EnumProperty

from ...core.errors import CoreError
from ..bridge import BridgeError

ROLE_ENUM = (('SOURCE', "Source", ""), ('TARGET', "Target", ""))


def settings_of(context):
    return context.scene.reconform


def error_text(ex: Exception) -> str:
    """One line for a report: the message of our own errors, the type and message of anything else."""
    msg = str(ex).strip().splitlines()[0] if str(ex).strip() else ""
    if isinstance(ex, (CoreError, BridgeError)):
        return msg or type(ex).__name__
    return f"{type(ex).__name__}: {msg}" if msg else type(ex).__name__


def tag_redraw(context=None):
    wm = (context or bpy.context).window_manager
    for win in wm.windows:
        for area in win.screen.areas:
            if area.type == 'VIEW_3D':
                area.tag_redraw()


@dataclass(frozen=True)
class Done:
    """What a plain operator function did, as one report line ('' reports nothing)."""

    text: str = ""
    level: str = 'INFO'  #: 'INFO' or 'WARNING'


def run(op, fn, *args, redraw=None) -> set:
    """``execute``'s tail: ``fn(*args)``, then ``op`` reports its ``Done`` line and returns {'FINISHED'}.

    An exception is reported as one ERROR line ({'CANCELLED'}); ``fn`` returning None means there was nothing
    to do ({'CANCELLED'}, no report). ``redraw``: a context whose 3D views are redrawn after a success.
    """
    try:
        done = fn(*args)
    except Exception as ex:  # noqa: BLE001 - one line for the user, whatever failed
        op.report({'ERROR'}, error_text(ex))
        return {'CANCELLED'}
    if done is None:
        return {'CANCELLED'}
    if done.text:
        op.report({done.level}, done.text)
    if redraw is not None:
        tag_redraw(redraw)
    return {'FINISHED'}


def role_armature(s, role: str):
    """The armature of ``role`` ('SOURCE'|'TARGET') in the panel's settings ``s``; BridgeError when unset."""
    arm = s.character(role)
    if arm is None:
        raise BridgeError(f"No {role.lower()} armature: pick one in the Characters panel.")
    return arm


class RoleMixin:
    """Operators acting on one character (source or target) of the panel."""

    role: EnumProperty(name="Character", items=ROLE_ENUM, default='SOURCE')

    @classmethod
    def poll(cls, context):
        s = settings_of(context)
        return s.source is not None or s.target is not None


def check_characters(s, need_target: bool = True):
    """Raise a clear BridgeError when the panel's characters are not usable."""
    if s.source is None:
        raise BridgeError("No source armature: pick the character whose animation you want to retarget.")
    if need_target and s.target is None:
        raise BridgeError("No target armature: pick the character that should receive the motion.")
    for role, ob in (("Source", s.source), ("Target", s.target)):
        if ob is not None and ob.type != 'ARMATURE':
            raise BridgeError(f"{role} '{ob.name}' is not an armature: pick an armature object.")
    if need_target and s.source == s.target:
        raise BridgeError(f"Source and target are both '{s.source.name}': pick two different armatures.")


def push_to_nla(obj, action):
    """Push ``action`` (assigned with its slot) down onto a new NLA track of ``obj``; returns the strip."""
    ad = obj.animation_data or obj.animation_data_create()
    slot = getattr(ad, "action_slot", None)
    track = ad.nla_tracks.new()
    track.name = action.name
    start = int(action.frame_range[0])
    strip = track.strips.new(action.name, start, action)
    if slot is not None and hasattr(strip, "action_slot"):
        strip.action_slot = slot
    ad.action = None
    return strip
