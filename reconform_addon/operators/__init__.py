"""Operators of the ReConForM panel, one module per topic (like Blender's ``bl_operators``):

- ``bone_map``: auto-detect, save / load a JSON preset, built-in presets;
- ``keyverts``: transfer the key-vertex template, re-place the unlocked ones, unlock all;
- ``meshes``: which meshes form each character's body (Auto, Body, Leave Out);
- ``retarget``: Retarget, Re-solve, and the orchestration they share; ``presets``: Load Preset Values;
- ``live``: the Live toggle (the window around the current frame, in the background; ``reconform_addon.live``);
- ``partners``: the partner pairs' list (Add, Remove) and the group run Retarget starts when it is on;
- ``conflicts``: the conflict list's rows and sliders, Reset Sliders.

Each operator's ``execute`` builds a frozen options object and calls a plain function of its module
(``common.run``); no operator calls another through ``bpy.ops``. Solves in flight and the last solve of each
scene live in ``reconform_addon.session``. ``reconform_addon.pipeline`` and the core modules that need torch
are imported inside the functions that run them (as Blender's io_scene_gltf2 imports its exporter inside
``execute``): enabling the add-on and drawing its panels never import torch.
"""

import bpy

from .. import handlers, session
from . import bone_map, conflicts, keyverts, live, meshes, partners, presets, retarget

#: Registered in this order (the add-on's ``register`` loops over it).
classes = (bone_map.classes + keyverts.classes + meshes.classes + retarget.classes + presets.classes
           + live.classes + partners.classes + conflicts.classes)


@bpy.app.handlers.persistent
def _cancel_runs_on_load(*_args):
    """``load_pre``: another file is being loaded (``session.on_load_pre``)."""
    session.on_load_pre()


def register():
    handlers.add(((bpy.app.handlers.load_pre, _cancel_runs_on_load),))


def unregister():
    handlers.remove(((bpy.app.handlers.load_pre, _cancel_runs_on_load),))
    session.cancel_all()
    session.forget()
