"""Values computed once per character object and kept while it lives (capsules, bulge points, surface fields, the
metrics' surface set-up): characters are immutable, so a value derived from one never goes stale. Such a value may
also depend on the constants of the module that computes it, which an experiment may patch between solves: the cache
keys on them too (``module_constants``)."""

from __future__ import annotations

import weakref


def per_character(cache: dict, character, compute, *depends):
    """``compute()`` once per live ``character`` (by identity) and setting of the public constants of the module that
    defines ``compute`` (``module_constants``), kept in ``cache`` until the character is freed; ``depends``: what
    else the value depends on (hashable). Shared: callers never modify what it returns."""
    key = (id(character), *depends) + module_constants(compute.__globals__)
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
