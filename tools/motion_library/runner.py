"""The one job runner of a library run, whatever the engine: plan each job (new / changed / failed before /
done), submit what must run, retry a crashed job once, log every start and end, and stop cleanly on Ctrl+C.

    runner = Runner(out_dir, jobs, Options(formats=("blend",), threads=1))
    plan = runner.plan()                  # [Planned(job, task, status, reason)]
    summary = runner.run(plan, engine)    # engines.LocalPool(...) or engines.RayEngine(...)
"""

from __future__ import annotations

import collections
import dataclasses
import os
import shutil
import signal
import threading
import time
from dataclasses import dataclass

from .inputs import InputError
from .jobs import PARTIAL, FileHashes, Task, code_version, hash_parts, job_status, parts_hash
from .progress import Progress, RunLog, choose, read_failures

LOG_NAME = "library_log.jsonl"
STATE = ".library"                     #: the run lock and the input-file hash cache
#: seconds to wait for cancelled jobs to stop on Ctrl+C before leaving them to the engine's shutdown
CANCEL_WAIT_S = 30.0


@dataclass(frozen=True)
class Options:
    """How jobs run (the same for every job of a run).

    formats: outputs besides the JSON report ('blend', 'fbx', 'glb', 'bvh'); threads: torch threads per job;
    python: the interpreter with the bpy module (None: this one); blender: a Blender binary to run instead;
    timeout: seconds a job may take (None: no limit); retry_failed: run jobs that failed before again."""

    formats: tuple = ("blend",)
    threads: int = 1
    python: str = None
    blender: str = None
    timeout: float = None
    retry_failed: bool = False


@dataclass
class Planned:
    job: object
    task: Task
    status: str               #: 'new', 'changed', 'failed' (before), 'done'
    reason: str
    runs: bool                #: new, changed, or failed before with --retry-failed


@dataclass
class Summary:
    total: int = 0
    skipped: int = 0          #: done before, not run again
    held: int = 0             #: failed before, not retried (no --retry-failed)
    ok: int = 0
    failed: int = 0
    cancelled: int = 0
    not_started: int = 0
    interrupted: bool = False
    seconds: float = 0.0
    frames: int = 0
    failures: list = dataclasses.field(default_factory=list)   #: [(key, error)]


class Runner:
    """``stream``: where progress goes (default stderr); ``progress``: 'auto', 'bar', 'lines' or 'none'
    (progress.choose; ``tty`` tells 'auto' whether ``stream`` is a terminal, else it asks the stream)."""

    def __init__(self, out_dir: str, jobs: list, options: Options, stream=None, tty: bool = None,
                 progress: str = "auto"):
        self.out_dir = os.path.abspath(out_dir)
        self.jobs, self.options = jobs, options
        self.stream, self.tty, self.progress = stream, tty, progress
        self.log_path = os.path.join(self.out_dir, LOG_NAME)
        self._lock = None

    # -------------------------------------------------------------------------------------------- plan
    def plan(self, save_hashes: bool = True) -> list:
        """[Planned] in job order: each job's task and why it would (not) run. Reads the output folder; writes
        only the input-file hash cache (not with ``save_hashes=False``: --dry-run)."""
        o = self.options
        hashes = FileHashes(os.path.join(self.out_dir, STATE, "hashes.json"))
        code = code_version(blender=o.blender)
        failures = read_failures(self.log_path)
        out = []
        for job in self.jobs:
            parts = hash_parts(job, o.formats, hashes, code)
            status, reason = job_status(self.out_dir, job.key, parts, o.formats, failures.get(job.key))
            if status == "failed" and o.retry_failed:
                reason += " (--retry-failed: runs again)"
            cuda = str(((job.setup or {}).get("settings") or {}).get("device", "cpu")).startswith("cuda")
            task = Task(job.key, job.clip, job.character, job.action, job.frames, job.setup or {}, job.name,
                        tuple(o.formats), self.out_dir, parts_hash(parts), parts, o.threads, o.python, o.blender,
                        o.timeout, 1, {"cuda": cuda})
            runs = status in ("new", "changed") or (status == "failed" and o.retry_failed)
            out.append(Planned(job, task, status, reason, runs))
        if save_hashes:
            hashes.save()
        return out

    # -------------------------------------------------------------------------------------------- run
    def _take_lock(self):
        """One run at a time per output folder (a lock held by this process, released when it ends)."""
        os.makedirs(os.path.join(self.out_dir, STATE), exist_ok=True)
        path = os.path.join(self.out_dir, STATE, "lock")
        self._lock = open(path, "a+")
        try:
            import fcntl
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:          # Windows: no advisory lock; one run at a time is the user's to keep
            return
        except OSError:
            self._lock.seek(0)
            raise InputError(f"Another library run is writing '{self.out_dir}' (process {self._lock.read().strip()}"
                             "): wait for it, or give another --out.") from None
        self._lock.seek(0)
        self._lock.truncate()
        self._lock.write(str(os.getpid()))
        self._lock.flush()

    def _clear_partial(self, remove: bool = False):
        """Remove what killed runs left in OUT/.partial (no other run is live: this one holds the lock);
        ``remove``: the folder itself too, when it is left empty (the end of a run leaves nothing temporary)."""
        partial = os.path.join(self.out_dir, PARTIAL)
        if os.path.isdir(partial):
            for name in os.listdir(partial):
                shutil.rmtree(os.path.join(partial, name), ignore_errors=True)
            if remove:
                try:
                    os.rmdir(partial)
                except OSError:          # something appeared meanwhile: the next run clears it
                    pass

    def run(self, plan: list, engine, describe: str = "") -> Summary:
        """Run every planned job that must run on ``engine``; returns the Summary (Ctrl+C included)."""
        try:
            self._take_lock()
        except BaseException:
            engine.close()
            raise
        self._clear_partial()
        todo = [p for p in plan if p.runs]
        s = Summary(total=len(plan), skipped=sum(p.status == "done" for p in plan),
                    held=sum(p.status == "failed" and not p.runs for p in plan))
        log = RunLog(self.log_path)
        log.event("run_start", pid=os.getpid(), engine=engine.name, describe=describe, jobs=len(plan),
                  to_run=len(todo), done_before=s.skipped, failed_before=s.held,
                  threads=self.options.threads, formats=list(self.options.formats))
        progress = Progress(len(todo), self.stream, choose(self.progress, self.stream, self.tty))
        queue = collections.deque(p.task for p in todo)
        t0 = time.monotonic()
        # Ctrl+C and SIGTERM set a flag that the loop reads between waits: a KeyboardInterrupt raised at an
        # arbitrary point could land inside concurrent.futures' locks and leave a worker thread blocked forever
        stop = threading.Event()
        previous = _on_stop_signals(lambda signum, frame: stop.set()) if _main_thread() else None
        try:
            while (queue or engine.in_flight()) and not stop.is_set():
                while queue and engine.in_flight() < engine.capacity() and not stop.is_set():
                    task = queue.popleft()
                    engine.submit(task)
                    log.event("start", key=task.key, attempt=task.attempt, hash=task.hash)
                    progress.started()
                for task, result in engine.wait(0.5):
                    self._ended(task, result, queue, log, progress, s)
                progress.tick()
            if stop.is_set():
                raise KeyboardInterrupt
        except KeyboardInterrupt:
            s.interrupted = True
            self._interrupt(engine, queue, log, progress, s)
        finally:
            if previous is not None:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
            engine.close()
            # a cancelled Ray task reports its end before its worker has removed its scratch folder, and a
            # worker that the engine's close stops then leaves it: clear what is left (this run holds the lock),
            # and the scratch folder itself
            self._clear_partial(remove=True)
            progress.close()
            s.seconds = time.monotonic() - t0
            log.event("run_end", ok=s.ok, failed=s.failed, cancelled=s.cancelled, not_started=s.not_started,
                      interrupted=s.interrupted, seconds=round(s.seconds, 3), frames=s.frames)
            log.close()
            self._release_lock()
        return s

    def _release_lock(self):
        if self._lock is not None:
            self._lock.close()           # closing the file releases its lock
            self._lock = None

    def _ended(self, task, result, queue, log, progress, s: Summary):
        """Record one finished job; a crashed first attempt goes back to the front of the queue."""
        outcome = result.get("outcome")
        retry = outcome == "crashed" and task.attempt == 1
        log.event("end", **{k: v for k, v in result.items() if k != "attempt"}, attempt=task.attempt, retry=retry)
        progress.ended(task.key, result, final=not retry)
        if retry:
            queue.appendleft(dataclasses.replace(task, attempt=2))
        elif outcome == "ok":
            s.ok += 1
            s.frames += result.get("frames") or 0
        elif outcome == "cancelled":
            s.cancelled += 1
        else:
            s.failed += 1
            s.failures.append((task.key, result.get("error")))

    def _interrupt(self, engine, queue, log, progress, s: Summary):
        """Ctrl+C (or SIGTERM): stop the jobs in flight (a job that finishes meanwhile is kept), start nothing."""
        old = signal.signal(signal.SIGINT, signal.SIG_IGN) if _main_thread() else None
        try:
            s.not_started = len(queue)
            queue.clear()
            engine.cancel()
            deadline = time.monotonic() + CANCEL_WAIT_S
            while engine.in_flight() and time.monotonic() < deadline:
                for task, result in engine.wait(0.5):
                    self._ended(task, result, queue, log, progress, s)
            s.cancelled += engine.in_flight()
            s.not_started += len(queue)
            queue.clear()
        finally:
            if old is not None:
                signal.signal(signal.SIGINT, old)


def _on_stop_signals(handler) -> dict:
    """Install ``handler`` for SIGINT and SIGTERM; returns {signal: previous handler}."""
    return {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()
