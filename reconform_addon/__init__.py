"""ReConForM add-on: everything that imports bpy. The math lives in ``..core``.

Each submodule listed in ``MODULES`` exposes ``register()`` / ``unregister()`` (or a ``classes`` tuple).
torch is never imported at module level here: enabling the add-on stays fast and works without torch.
"""

import importlib

#: Submodules registered in this order (unregistered in reverse).
MODULES = ("properties", "preferences", "operators", "live", "gizmos", "panels")

_loaded = []


def _submodules():
    return [importlib.import_module(f"{__package__}.{name}") for name in MODULES]


def register():
    import bpy

    for mod in _submodules():
        for cls in getattr(mod, "classes", ()):
            bpy.utils.register_class(cls)
        if hasattr(mod, "register"):
            mod.register()
        _loaded.append(mod)


def unregister():
    import bpy

    while _loaded:
        mod = _loaded.pop()
        if hasattr(mod, "unregister"):
            mod.unregister()
        for cls in reversed(getattr(mod, "classes", ())):
            bpy.utils.unregister_class(cls)
