"""``--set NAME=VALUE`` solver-setting overrides as Python values: the demo's, the bench's and the experiments'."""

from __future__ import annotations

import ast
import json


def setting_overrides(pairs) -> dict:
    """SolverSettings overrides from ``--set NAME=VALUE`` strings: numbers, true/false and lists as JSON, Python's
    own literals (True, False, None, tuples) as Python reads them, anything else (track, feet, ...) as text."""
    out = {}
    for kv in pairs:
        k, _, v = kv.partition("=")
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            try:
                out[k] = ast.literal_eval(v)
            except (ValueError, SyntaxError):
                out[k] = v
    return out
