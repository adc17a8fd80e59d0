"""Values computed once per character object and kept while it lives (capsules, bulge points, surface fields, the
metrics' surface set-up): characters are immutable, so a value derived from one never goes stale. One that also
depends on its module's constants, which an experiment may patch between solves, keys on them (``module_constants``)."""

from __future__ import annotations

import weakref


def per_character(cache: dict, character, compute, key=None):
    """``compute()`` once per live ``character`` (by identity), kept in ``cache`` until the character is freed;
    ``key``: the cache key when the value depends on more than the character (default ``id(character)``).
    Shared: callers never modify what it returns."""
    key = id(character) if key is None else key
    hit = cache.get(key)
    if hit is not None and hit[0]() is character:
        return hit[1]
    out = compute()
    cache[key] = (weakref.ref(character), out)
    weakref.finalize(character, cache.pop, key, None)
    return out


def module_constants(namespace: dict) -> tuple:
    """((name, repr(value)), ...), sorted, of a module's public UPPER_CASE names (its ``globals()``): the part of a
    ``per_character`` key that changes when an experiment patches any of them, one added later included."""
    return tuple(sorted((k, repr(v)) for k, v in namespace.items() if k.isupper() and not k.startswith("_")))
