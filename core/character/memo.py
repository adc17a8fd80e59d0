"""Values computed once per character object and kept while it lives (capsules, bulge points, surface fields, the
metrics' surface set-up): characters are immutable, so a value derived from one never goes stale."""

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
