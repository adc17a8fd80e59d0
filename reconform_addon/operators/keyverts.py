"""Key-vertex operators: transfer the template onto a character, re-place the unlocked ones, unlock all.

The key vertices are stored on the character's mesh (``bridge.keyverts``); the viewport shows and edits them
through ``gizmos``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import bpy

from ..bridge import BridgeError, bodyparts, geometry
from ..bridge import keyverts as kvstore
from .common import Done, RoleMixin, role_armature, run, settings_of


@dataclass(frozen=True)
class KeyVertexOptions:
    """Whose key vertices an operator works on, and how."""

    role: str                 #: 'SOURCE' or 'TARGET'
    count: int = 41           #: template size (41 or 96)
    keep_locked: bool = True  #: a transfer keeps the key vertices placed by hand


def place(s, options: KeyVertexOptions) -> Done:
    """Transfer the template's key vertices onto the role's character by optimal transport and store them on
    its mesh (locked ones kept when ``options.keep_locked``)."""
    from ...core.character.complete import build_character   # torch and POT: only when a transfer runs
    from .. import pipeline

    arm = role_armature(s, options.role)
    kvstore.check_can_store(arm)   # before the transfer's seconds of work
    spec = pipeline.read_character(arm, s.bone_map(options.role) or None, need_mesh=True)
    if not options.keep_locked:
        spec = replace(spec, stored_keyverts=None)
    built = build_character(spec, keyvert_count=options.count, need_mesh=True, reuse_stored=False)
    ch = built.character
    kvs = ch.keyverts
    kvstore.store(arm, ch, kvs)
    bodyparts.remember_left_out(arm, built.meshes_left_out)
    geometry.invalidate()
    nl = int(kvs.locked.sum())
    return Done(f"'{arm.name}': {len(kvs)} key vertices placed" + (f", {nl} locked kept" if nl else ""))


def unlock(s, options: KeyVertexOptions) -> Done:
    """Unlock every key vertex of the role's character (the next transfer re-places them all)."""
    holder = kvstore.holder_mesh(s.character(options.role))
    if holder is None:
        raise BridgeError("This character has no key vertices yet: run Transfer first.")
    kvstore.check_can_store(s.character(options.role))
    for it in holder.reconform_keyverts:
        it.locked = False
    return Done()


class RECONFORM_OT_transfer_keyverts(RoleMixin, bpy.types.Operator):
    """Place the template's key vertices on this character by optimal transport (hand-placed ones are kept
    unless 'Keep Locked' is off)"""

    bl_idname = "reconform.transfer_keyverts"
    bl_label = "Transfer Key Vertices"
    bl_options = {'REGISTER', 'UNDO'}

    keep_locked: bpy.props.BoolProperty(name="Keep Locked", default=True,
                                        description="Keep the key vertices placed by hand")

    def execute(self, context):
        s = settings_of(context)
        options = KeyVertexOptions(self.role, int(s.keyvert_count), keep_locked=self.keep_locked)
        return run(self, place, s, options, redraw=context)


class RECONFORM_OT_reset_keyverts(RoleMixin, bpy.types.Operator):
    """Re-place every key vertex that was not placed by hand (locked ones stay)"""

    bl_idname = "reconform.reset_keyverts"
    bl_label = "Reset Unlocked"
    bl_options = {'REGISTER', 'UNDO'}

    def execute(self, context):
        s = settings_of(context)
        return run(self, place, s, KeyVertexOptions(self.role, int(s.keyvert_count), keep_locked=True),
                   redraw=context)


class RECONFORM_OT_unlock_keyverts(RoleMixin, bpy.types.Operator):
    """Unlock every key vertex of this character (the next transfer re-places them all)"""

    bl_idname = "reconform.unlock_keyverts"
    bl_label = "Unlock All"
    bl_options = {'REGISTER', 'UNDO'}

    def execute(self, context):
        return run(self, unlock, settings_of(context), KeyVertexOptions(self.role), redraw=context)


classes = (
    RECONFORM_OT_transfer_keyverts,
    RECONFORM_OT_reset_keyverts,
    RECONFORM_OT_unlock_keyverts,
)
