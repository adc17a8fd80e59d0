"""What a solve driven as a generator shares (``SolveJob``, ``GroupSolveJob``): its step count, a cancel flag that
another thread sets and the steps read between two steps, and whether it has finished."""

from __future__ import annotations

import threading


class StepLifecycle:
    """A solve's state between steps: not set up, stepping (``_step`` of ``total``), cancelled or done."""

    def __init__(self):
        self._cancel = threading.Event()
        self._ready = False
        self._done = False
        self._step = 0

    def cancel(self):
        """Ask the solve to stop before its next step (thread-safe)."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def done(self) -> bool:
        return self._done


__all__ = ["StepLifecycle"]
