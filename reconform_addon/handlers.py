"""Adding and removing the add-on's ``bpy.app.handlers`` functions (each module lists its (list, function)
pairs; registering twice adds nothing, unregistering removes every copy)."""


def add(pairs):
    """Append each ``fn`` to its handler list ``lst`` unless it is there already; ``pairs``: ((lst, fn), ...)."""
    for lst, fn in pairs:
        if fn not in lst:
            lst.append(fn)


def remove(pairs):
    """Remove every copy of each ``fn`` from its handler list."""
    for lst, fn in pairs:
        while fn in lst:
            lst.remove(fn)
