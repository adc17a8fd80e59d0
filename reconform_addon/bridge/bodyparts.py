"""Which of an armature's meshes form the character's body: the user's choice, stored on the armature, and the
last reading of the core (``core.character.meshparts``: clothing, eyes and props are left out automatically).

``Object.reconform_meshes`` (items ``properties.RECONFORM_PG_mesh_use``: a mesh object and 'AUTO', 'BODY' or
'LEAVE_OUT') holds the choice, saved with the armature; ``Object.reconform_left_out`` keeps, as JSON, the meshes
the last retarget or transfer left out and why, for the panel (which cannot run the core's reading itself).
"""

from __future__ import annotations

import json

from .errors import BridgeError
from .read import find_meshes

USES = ('AUTO', 'BODY', 'LEAVE_OUT')


def _item(arm, mesh_obj):
    for it in arm.reconform_meshes:
        if it.object == mesh_obj:
            return it
    return None


def mesh_use(arm, mesh_obj) -> str:
    """'AUTO', 'BODY' or 'LEAVE_OUT': the user's choice for ``mesh_obj`` on ``arm``."""
    it = _item(arm, mesh_obj)
    return it.use if it is not None else 'AUTO'


def set_mesh_use(arm, mesh_obj, use: str):
    """Store the user's choice for ``mesh_obj`` ('AUTO' forgets it)."""
    if use not in USES:
        raise BridgeError(f"Mesh use must be one of {', '.join(USES)}, not '{use}'.")
    if mesh_obj not in find_meshes(arm):
        raise BridgeError(f"Armature '{arm.name}' does not move mesh '{mesh_obj.name}'.")
    it = _item(arm, mesh_obj)
    if use == 'AUTO':
        if it is not None:
            arm.reconform_meshes.remove(list(arm.reconform_meshes).index(it))
        return
    if it is None:
        it = arm.reconform_meshes.add()
        it.object = mesh_obj
    it.use = use


def stored_choice(arm) -> dict:
    """{mesh object name: True (body) / False (left out)} of the choices stored on ``arm`` for meshes it still
    moves (stale entries are ignored)."""
    meshes = set(find_meshes(arm))
    return {it.object.name: it.use == 'BODY' for it in arm.reconform_meshes
            if it.object is not None and it.object in meshes and it.use != 'AUTO'}


def setup_choice(entry: dict, arm) -> dict:
    """{mesh name: bool} from a set-up entry's ``"meshes"`` (the body: only these) and ``"exclude_meshes"``
    (left out), checked against the meshes ``arm`` moves; {} when it names none."""
    return setup_choices(entry, [arm])[0]


def setup_choices(entry: dict, arms) -> list:
    """``setup_choice`` for the armatures of one role in a group (several characters together): every name must
    be a mesh one of them moves; each armature gets the choices of its own meshes (``"meshes"`` leaves out its
    other meshes when it names one of them, else its body is read as usual)."""
    if not isinstance(entry, dict) or not (entry.get("meshes") or entry.get("exclude_meshes")):
        return [{} for _ in arms]
    names = [[m.name for m in find_meshes(arm)] for arm in arms]
    given = {}
    for key, use in (("meshes", True), ("exclude_meshes", False)):
        listed = entry.get(key) or []
        if isinstance(listed, str) or not all(isinstance(n, str) for n in listed):
            raise BridgeError(f"Set-up \"{key}\" must be a list of mesh names.")
        for n in listed:
            if not any(n in own for own in names):
                if len(arms) == 1:
                    raise BridgeError(f"Set-up \"{key}\": armature '{arms[0].name}' moves no mesh '{n}' (its meshes: "
                                      f"{', '.join(names[0]) or 'none'}).")
                raise BridgeError(f"Set-up \"{key}\": no armature of the group ("
                                  + ", ".join(f"'{a.name}'" for a in arms) + f") moves a mesh '{n}'.")
            given[n] = use
    out = []
    for own in names:
        choice = {n: use for n, use in given.items() if n in own}
        if any(choice.values()):
            choice.update({n: False for n in own if n not in choice})
        out.append(choice)
    return out


def remember_left_out(arm, left_out: dict):
    """Keep on ``arm`` the meshes the core left out and why (shown by the panel's Meshes list)."""
    arm.reconform_left_out = json.dumps(dict(left_out), sort_keys=True)


def left_out(arm):
    """{mesh name: why} the last retarget or transfer left out ({} when none), or None before the first one."""
    text = getattr(arm, "reconform_left_out", "")
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


__all__ = ["USES", "left_out", "mesh_use", "remember_left_out", "set_mesh_use", "setup_choice", "stored_choice"]
