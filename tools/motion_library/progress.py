"""What a library run tells while it runs: one progress bar (tqdm) in a terminal, one line per finished job
elsewhere (a log file, CI), and the JSON-lines log ``OUT/library_log.jsonl`` with every job's start and end (time,
outcome, error), appended to by every run, which is also where the next run reads which jobs failed before."""

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


#: --progress: 'auto' is the bar on a terminal (with tqdm installed), the lines elsewhere
MODES = ("auto", "bar", "lines", "none")
#: the bar: finished/total, the bar, the counts (tqdm's description), elapsed and time left (tqdm's ETA)
BAR_FORMAT = "[library] {n_fmt}/{total_fmt} |{bar}| {desc} | elapsed {elapsed} | ETA {remaining}"
#: the bar's whole width where the stream tells none (a pipe, or a terminal that reports a size of 0 x 0, where
#: tqdm would cut the line to nothing and draw no row)
UNKNOWN_WIDTH = 160


def _columns(stream) -> int:
    """The width of the terminal ``stream`` writes to, 0 when it tells none."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return 0


def tqdm_class():
    """tqdm's progress bar class, or None when tqdm is not installed (requirements-library.txt)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


def choose(mode: str = "auto", stream=None, tty: bool = None) -> str:
    """'bar', 'lines' or 'none' for ``--progress MODE``: 'auto' is the bar when ``stream`` (default stderr) is a
    terminal (``tty`` overrides what it says) and tqdm is installed, else the lines."""
    if mode != "auto":
        return mode
    stream = stream or sys.stderr
    if tty is None:
        tty = bool(getattr(stream, "isatty", lambda: False)())
    return "bar" if tty and tqdm_class() is not None else "lines"


class Progress:
    """Jobs done / failed / running, frames per second and the time left, as the run goes.

    mode 'bar': one tqdm bar, redrawn in place; failures and crashes are printed above it.
    mode 'lines': one line per finished job and per failure, and the status line every ``every_s`` seconds:
    what a log file or CI keeps. mode 'none': nothing (the run's closing lines still list the failures)."""

    def __init__(self, total: int, stream=None, mode: str = "lines", every_s: float = 60.0):
        self.stream = stream or sys.stderr
        self.mode = choose(mode, self.stream)
        if self.mode == "bar" and tqdm_class() is None:      # the command refuses --progress bar without tqdm
            self.mode = "lines"
        self.total, self.every_s = total, every_s
        self.done = self.failed = self.running = self.frames = 0
        self.t0 = self._last = time.monotonic()
        self.bar = None
        if self.mode == "bar":
            width = {"dynamic_ncols": True} if _columns(self.stream) else {"ncols": UNKNOWN_WIDTH, "nrows": 24}
            self.bar = tqdm_class()(total=total, file=self.stream, bar_format=BAR_FORMAT, desc=self.counts(),
                                    smoothing=0, mininterval=0.2, leave=True, **width)

    def counts(self) -> str:
        elapsed = time.monotonic() - self.t0
        fps = self.frames / elapsed if elapsed > 0 else 0.0
        return f"done {self.done} | failed {self.failed} | running {self.running} | {fps:.0f} frames/s"

    def line(self) -> str:
        """The status line of the 'lines' mode."""
        elapsed = time.monotonic() - self.t0
        finished = self.done + self.failed
        eta = "--:--" if not finished else _clock((self.total - finished) * elapsed / finished)
        return f"[library] {finished}/{self.total} | {self.counts()} | elapsed {_clock(elapsed)} | ETA {eta}"

    def _refresh(self):
        if self.bar is not None:
            self.bar.set_description_str(self.counts(), refresh=False)
            self.bar.refresh()
            self._last = time.monotonic()

    def say(self, text: str):
        """A line of its own (above the bar)."""
        if self.mode == "none":
            return
        if self.bar is not None:
            self.bar.write(text, file=self.stream)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def started(self):
        self.running += 1
        self._refresh()

    def ended(self, key: str, result: dict, final: bool = True):
        self.running -= 1
        outcome = result.get("outcome")
        if outcome == "ok":
            self.done += 1
            self.frames += result.get("frames") or 0
            if self.mode == "lines":
                self.say(f"[library] ok      {key} ({result.get('frames')} frames, {result.get('seconds', 0):.1f} s)"
                         f" [{self.done + self.failed}/{self.total}]")
        elif outcome in ("failed", "crashed"):
            if final:
                self.failed += 1
            again = "" if final else " (retrying once)"
            self.say(f"[library] {outcome:<7} {key}: {result.get('error')}{again}")
        if self.bar is not None and final and outcome in ("ok", "failed", "crashed"):
            self.bar.set_description_str(self.counts(), refresh=False)
            self.bar.update(1)
        self._refresh()

    def tick(self):
        """Between the runner's waits: the bar's elapsed time and ETA move on; the lines' status line comes every
        ``every_s`` seconds."""
        since = time.monotonic() - self._last
        if self.bar is not None and since >= 0.5:
            self._refresh()
        elif self.mode == "lines" and since >= self.every_s:
            self.say(self.line())
            self._last = time.monotonic()

    def close(self):
        if self.bar is not None:
            self._refresh()
            self.bar.close()
            self.bar = None
