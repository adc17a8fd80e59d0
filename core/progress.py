"""Long computations as generators of progress: each yields the share done (a float in [0, 1]) and returns its
result, so ``core.pipeline.retarget`` can report a phase that takes seconds on a long clip (the metrics' whole-mesh
passes, the conflicts' gradients) while plain callers just ``drive`` it.

    value = drive(evaluation(...))                 # the result, ignoring the progress
    value = yield from scaled(evaluation(...), a, b)   # inside another generator: its shares mapped onto [a, b]
"""

from __future__ import annotations


def drive(gen):
    """Run a generator of progress shares to its end; its return value."""
    while True:
        try:
            next(gen)
        except StopIteration as done:
            return done.value


def scaled(gen, a: float, b: float):
    """The shares of ``gen`` mapped onto [a, b]; returns its value."""
    while True:
        try:
            f = next(gen)
        except StopIteration as done:
            return done.value
        yield a + (b - a) * f


__all__ = ["drive", "scaled"]
