"""What a library run tells while it runs: a live progress line in a terminal (plain lines otherwise), and the
JSON-lines log ``OUT/library_log.jsonl`` with every job's start and end (time, outcome, error), appended to by
every run, which is also where the next run reads which jobs failed before."""

from __future__ import annotations

import json
import os
import sys
import time


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


class RunLog:
    """Append-only JSON lines: {"time", "event": run_start|start|end|run_end, ...}; one line per write, flushed,
    so a killed run leaves at most its last line cut (skipped when read)."""

    def __init__(self, path: str):
        self.path = path
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._f = open(path, "a", encoding="utf-8")

    def event(self, kind: str, **fields):
        self._f.write(json.dumps({"time": _now(), "event": kind, **fields}, default=str) + "\n")
        self._f.flush()

    def close(self):
        self._f.close()


def read_events(path: str) -> list:
    """Every complete event of a run log (a line cut by a crash is skipped)."""
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
    except OSError:
        return []
    return out


def read_failures(path: str) -> dict:
    """{job key: last end event} of the jobs whose last recorded end is a failure (a crash retried in the same
    run does not count; a cancelled job keeps what it had before)."""
    failed = {}
    for ev in read_events(path):
        if ev.get("event") != "end" or ev.get("retry"):
            continue
        if ev.get("outcome") == "ok":
            failed.pop(ev.get("key"), None)
        elif ev.get("outcome") in ("failed", "crashed"):
            failed[ev.get("key")] = ev
    return failed


def _clock(seconds: float) -> str:
    s = int(max(0, seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class Progress:
    """Jobs done / failed / running, frames per second and ETA: one line redrawn in place on a terminal, one
    line per finished job (and a status line every ``every_s`` seconds) elsewhere."""

    def __init__(self, total: int, stream=None, tty: bool = None, every_s: float = 60.0):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.total, self.every_s = total, every_s
        self.done = self.failed = self.running = self.frames = 0
        self.t0 = self._last = time.monotonic()
        self._width = 0

    def line(self) -> str:
        elapsed = time.monotonic() - self.t0
        finished = self.done + self.failed
        fps = self.frames / elapsed if elapsed > 0 else 0.0
        eta = "--:--" if not finished else _clock((self.total - finished) * elapsed / finished)
        return (f"[library] {finished}/{self.total} | done {self.done} | failed {self.failed} | running "
                f"{self.running} | {fps:.0f} frames/s | elapsed {_clock(elapsed)} | ETA {eta}")

    def _draw(self):
        text = self.line()
        if self.tty:
            self.stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self._last = time.monotonic()

    def say(self, text: str):
        """A line of its own (above the live line on a terminal)."""
        if self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self._width = 0
        self.stream.write(text + "\n")
        self.stream.flush()
        if self.tty:
            self._draw()

    def started(self):
        self.running += 1
        if self.tty:
            self._draw()

    def ended(self, key: str, result: dict, final: bool = True):
        self.running -= 1
        outcome = result.get("outcome")
        if outcome == "ok":
            self.done += 1
            self.frames += result.get("frames") or 0
            if not self.tty:
                self.say(f"[library] ok      {key} ({result.get('frames')} frames, {result.get('seconds', 0):.1f} s)"
                         f" [{self.done + self.failed}/{self.total}]")
        elif outcome in ("failed", "crashed"):
            if final:
                self.failed += 1
            again = "" if final else " (retrying once)"
            self.say(f"[library] {outcome:<7} {key}: {result.get('error')}{again}")
        if self.tty:
            self._draw()

    def tick(self):
        if self.tty and time.monotonic() - self._last >= 0.5:
            self._draw()
        elif not self.tty and time.monotonic() - self._last >= self.every_s:
            self._draw()

    def close(self):
        if self.tty and self._width:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()
