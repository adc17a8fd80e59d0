"""What Blender lets us change on linked and library-overridden characters (checked before anything is written).

Blender's rules, as they apply to a retarget (checked with the bpy wheel, tests/addon/test_library_targets.py):
- A **linked** object (``ob.library`` set) is read-only data of another file: a new Action assigned to it
  has no user in this file and is dropped on save. Such a target is refused; the user makes a library
  override (Object > Library Override > Make) and retargets onto the override.
- A **library override** (``ob.override_library`` set) keeps a local Action assigned to its
  ``animation_data`` across save and reload, when it is an *editable* override. A *system* override (the
  parts of an override hierarchy the user did not pick) is shown greyed out and not editable in Blender's UI,
  so it is refused as well, naming the way to make it editable.
- Key vertices (``Object.reconform_keyverts``, a collection property of the add-on) cannot be added to an
  override (Blender: ``bpy_prop_collection.add(): not supported for this collection``) and would be lost on
  save for a linked mesh: they are stored only on local meshes. Key vertices stored in the character's own
  .blend are read through the link as usual.
"""

from __future__ import annotations


def _library_file(ob) -> str:
    lib = ob.library
    return lib.filepath if lib is not None else ""


def animation_blocker(arm) -> str:
    """Why armature object ``arm`` cannot keep a new Action ('' when it can), with what to do."""
    if arm.library is not None:
        return (f"Armature '{arm.name}' is linked from '{_library_file(arm)}' and cannot keep a new Action: make "
                "a library override of it (Object > Library Override > Make) and retarget onto the override.")
    ov = arm.override_library
    if ov is not None and ov.is_system_override:
        return (f"Armature '{arm.name}' is a non-editable library override and cannot keep a new Action: make it "
                "editable (Outliner, Library Overrides view) and retarget again.")
    return ""


def storage_blocker(mesh_ob) -> str:
    """Why key vertices cannot be stored on mesh object ``mesh_ob`` ('' when they can)."""
    if mesh_ob.library is not None:
        return f"mesh '{mesh_ob.name}' is linked from '{_library_file(mesh_ob)}'"
    if mesh_ob.override_library is not None:
        return f"mesh '{mesh_ob.name}' is a library override"
    return ""
