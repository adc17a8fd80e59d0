"""One library job on disk: its hash, its status, and ``run_job`` (the same code under both engines).

A job's folder ``OUT/<character>/<clip id>/<method id>/`` (its key: inputs.job_key; the method id is
``copy_rotations`` or ``reconform-<quality>``) holds its outputs (``<clip id>.blend/.fbx/.glb/.bvh``), the
retarget's ``report.json``, the per-frame ``series.json`` the library report plots, the ``setup.json`` it ran
with, its logs, and ``job.json`` (the hash parts it was made from). ``run_job`` runs ``tools/retarget.py`` (the
single-clip command) in its own process, writing into ``OUT/.partial/<...>``; only when the process exits 0
and every output is there does the folder get renamed into place, so a killed job never leaves a half file.

Resume rule: a job whose ``job.json`` has the same hash and whose outputs all exist is done. The hash covers the
clip's and the character's file contents, the merged set-up (with the contents of any bone-map file it names),
the job's options (action, frames, name, formats) and the code's version (every file under core/ and
reconform_addon/, tools/retarget.py, tools/extension.py, and the bpy / torch versions or the Blender binary).
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.metadata
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field

from .inputs import key_parts

ROOT = pathlib.Path(__file__).resolve().parents[2]
RETARGET = ROOT / "tools" / "retarget.py"
FORMATS = ("blend", "fbx", "glb", "bvh")
CODE_PATHS = ("core", "reconform_addon", "tools/retarget.py", "tools/extension.py", "blender_manifest.toml",
              "__init__.py")
PARTIAL, FAILED = ".partial", "failed"
#: a job process ended by anything but these exit statuses crashed (killed, out of memory): retried once
EXIT_STATUSES = {0: "ok", 1: "bad input", 2: "bad arguments", 3: "internal error"}
#: seconds a cancelled job gets to stop after SIGTERM before SIGKILL
TERM_GRACE_S = 5.0


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def code_version(root: pathlib.Path = ROOT, blender: str = None) -> str:
    """Hash of the code a job runs: every file under core/ and reconform_addon/, the batch command and the
    extension helper, and the runtime (bpy and torch versions, read without importing them, or the Blender
    binary's path, size and time)."""
    h = hashlib.sha256()
    for rel in CODE_PATHS:
        p = root / rel
        files = sorted(q for q in p.rglob("*") if q.is_file() and "__pycache__" not in q.parts) if p.is_dir() \
            else [p] if p.is_file() else []
        for q in files:
            h.update(str(q.relative_to(root)).encode() + b"\0" + q.read_bytes() + b"\0")
    if blender:
        st = os.stat(blender)
        h.update(f"blender:{os.path.realpath(blender)}:{st.st_size}:{st.st_mtime_ns}".encode())
    else:
        for dist in ("bpy", "torch"):
            try:
                h.update(f"{dist}=={importlib.metadata.version(dist)}".encode())
            except importlib.metadata.PackageNotFoundError:
                h.update(f"{dist}: absent".encode())
    return h.hexdigest()[:16]


class FileHashes:
    """Content hashes of input files, cached by (size, mtime) in ``OUT/.partial/../hashes.json``: a library of
    thousands of clips is read once, then only the files that changed. A file that cannot be read hashes as
    'unreadable: <reason>' (its job then runs and fails with the retarget's own message)."""

    def __init__(self, cache_path: str = None):
        self.path = cache_path
        self.cache = {}
        if cache_path and os.path.isfile(cache_path):
            try:
                with open(cache_path, encoding="utf-8") as f:
                    self.cache = json.load(f)
            except (OSError, ValueError):
                self.cache = {}

    def get(self, path: str) -> str:
        try:
            st = os.stat(path)
            stamp = [st.st_size, st.st_mtime_ns]
            hit = self.cache.get(path)
            if hit and hit[:2] == stamp:
                return hit[2]
            h = hashlib.sha256()
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            self.cache[path] = stamp + [h.hexdigest()]
            return h.hexdigest()
        except OSError as ex:
            return f"unreadable: {ex.strerror or ex}"

    def save(self):
        if self.path:
            write_json_atomic(self.path, self.cache)


def write_json_atomic(path: str, value, indent=None):
    """Write ``value`` as JSON to a temporary name beside ``path``, then rename it into place."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=indent)
    os.replace(tmp, path)


def hash_parts(job, formats, hashes: FileHashes, code: str) -> dict:
    """The parts of a job's hash: clip, character, setup, options, code (each a short hex digest)."""
    setup = json.loads(canonical(job.setup or {}))
    for role in ("source", "target"):
        entry = setup.get(role) or {}
        if entry.get("bone_map_file"):
            entry["bone_map_file_sha"] = hashes.get(entry["bone_map_file"])
    options = {"action": job.action, "frames": job.frames, "name": job.name, "formats": sorted(formats)}
    return {"clip": hashes.get(job.clip)[:16], "character": hashes.get(job.character)[:16],
            "setup": _sha(canonical(setup).encode())[:16], "options": _sha(canonical(options).encode())[:16],
            "code": code}


def parts_hash(parts: dict) -> str:
    return _sha(canonical(parts).encode())[:16]


def file_stem(key: str) -> str:
    """What a job's exported files are named: its clip id (the key's middle part), e.g. 'walk' in
    'hero/walk/reconform-balanced'."""
    return key_parts(key)[1] or key.rsplit("/", 1)[-1]


def output_names(key: str, formats) -> list:
    """The files a finished job's folder holds besides its logs."""
    stem = file_stem(key)
    return [f"{stem}.{ext}" for ext in formats] + ["report.json", "series.json", "setup.json", "job.json"]


def job_status(out_dir: str, key: str, parts: dict, formats, failed: dict = None):
    """(status, reason) of a job: 'done', 'changed', 'failed' (failed before, same hash) or 'new'.

    ``failed``: the last recorded end of this job when it failed ({"hash", "error"}), from the run log."""
    h = parts_hash(parts)
    folder = os.path.join(out_dir, key)
    record = None
    try:
        with open(os.path.join(folder, "job.json"), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        record = None
    if record is not None:
        if record.get("hash") == h:
            missing = [n for n in output_names(key, formats) if not os.path.isfile(os.path.join(folder, n))]
            if not missing:
                return "done", "outputs present, same inputs, set-up, options and code"
            return "changed", f"{missing[0]} is missing"
        old = record.get("parts") or {}
        what = [k for k in ("clip", "character", "setup", "options", "code") if old.get(k) != parts.get(k)]
        return "changed", "changed: " + ", ".join(what or ["hash"])
    if failed is not None:
        if failed.get("hash") == h:
            return "failed", f"failed before: {failed.get('error') or 'no message'}"
        return "changed", "changed since it failed"
    legacy = os.path.dirname(folder)
    if os.path.isfile(os.path.join(legacy, "job.json")):
        return "new", (f"not run yet in this layout: {os.path.relpath(legacy, out_dir)}/ holds a result of the older "
                       "layout without a method folder, left as it is (move or delete it)")
    return "new", "not run yet"


# ------------------------------------------------------------------------------------------------ one job

@dataclass(frozen=True)
class Task:
    """Everything a worker needs to run one job (picklable; every path absolute).

    threads: torch / OpenMP threads of the job's process; python: the interpreter with the bpy module (None:
    the worker's own); blender: a Blender binary to run instead; timeout: seconds (None: no limit)."""

    key: str
    clip: str
    character: str
    action: str
    frames: tuple
    setup: dict
    name: str
    formats: tuple
    out_dir: str
    hash: str
    parts: dict
    threads: int = 1
    python: str = None
    blender: str = None
    timeout: float = None
    attempt: int = 1
    extra: dict = field(default_factory=dict)


def command(task: Task, tmp: str) -> list:
    """The job's command line: tools/retarget.py with this task's inputs, outputs under ``tmp``."""
    stem = file_stem(task.key)
    args = ["--source", task.clip, "--target", task.character, "--setup", os.path.join(tmp, "setup.json"),
            "--report", os.path.join(tmp, "report.json"), "--series", os.path.join(tmp, "series.json")]
    if task.action:
        args += ["--action", task.action]
    if task.frames:
        args += ["--frames", str(task.frames[0]), str(task.frames[1])]
    if task.name:
        args += ["--name", task.name]
    for ext in task.formats:
        args += ["--out" if ext == "blend" else "--export", os.path.join(tmp, f"{stem}.{ext}")]
    if task.blender:
        return [task.blender, "-b", "--factory-startup", "--python-exit-code", "1", "--python", str(RETARGET),
                "--", *args]
    return [task.python or sys.executable, str(RETARGET), *args]


def _libc_prctl():
    """libc's prctl on Linux (loaded here, in the parent: a forked child must not load libraries), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _libc_prctl()


def _die_with_parent():
    """In the job's process before exec: a job never outlives the worker that runs it (Linux)."""
    _PRCTL(1, signal.SIGKILL)   # PR_SET_PDEATHSIG


def _signal(proc, sig):
    """Send ``sig`` to the job's process group (its process and anything it started; the process alone where
    there are no process groups)."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass


def _reaped(proc):
    """(exit status, peak memory in MB, CPU seconds; both None where unknown) once the job's process ended,
    else None (never blocks)."""
    if hasattr(os, "wait4"):
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if not pid:
            return None
        proc.returncode = os.waitstatus_to_exitcode(status)
        return proc.returncode, round(usage.ru_maxrss / 1024.0, 1), round(usage.ru_utime + usage.ru_stime, 2)
    return None if proc.poll() is None else (proc.returncode, None, None)


def _wait(proc, deadline, cancel):
    """Wait for the job's process: (exit status, peak memory MB, CPU s, why it was stopped or None).
    A cancelled or timed-out job gets SIGTERM, then SIGKILL after TERM_GRACE_S."""
    stop, term_at = None, None
    while True:
        done = _reaped(proc)
        if done is not None:
            return done + (stop,)
        if stop is None:
            if cancel is not None and cancel.is_set():
                stop = "cancelled"
            elif deadline is not None and time.monotonic() > deadline:
                stop = "timeout"
            if stop is not None:
                _signal(proc, signal.SIGTERM)
                term_at = time.monotonic()
        elif time.monotonic() - term_at > TERM_GRACE_S:
            _signal(proc, signal.SIGKILL)
        time.sleep(0.1)


def _stop(proc):
    """Stop the job's process now (SIGTERM, then SIGKILL) and reap it."""
    _signal(proc, signal.SIGTERM)
    try:
        proc.wait(TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        _signal(proc, signal.SIGKILL)
        proc.wait()


def error_line(stderr_text: str, rc: int) -> str:
    """The job's one-line error: the last 'error:' line it printed, else how its process ended."""
    lines = [ln.strip() for ln in stderr_text.splitlines() if ln.strip().startswith("error:")]
    if lines:
        return lines[-1][len("error:"):].strip()
    if rc < 0:
        try:
            return f"the job's process was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"the job's process was killed by signal {-rc}"
    return f"the job's process exited with status {rc} without a message"


def publish(tmp: str, final: str, out_dir: str):
    """Rename the finished folder ``tmp`` into place at ``final`` (replacing an older result)."""
    os.makedirs(os.path.dirname(final), exist_ok=True)
    if os.path.isdir(final):
        old = os.path.join(out_dir, PARTIAL, f"old.{uuid.uuid4().hex}")
        os.rename(final, old)
        os.rename(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, final)


def run_job(task: Task, cancel=None) -> dict:
    """Run one job to the end (a pool thread or a Ray task); returns its outcome as a plain dict.

    ``cancel``: a threading.Event; when set the job's process is stopped and nothing is published. A Ray
    task cancelled with ``ray.cancel`` gets KeyboardInterrupt here: the process is stopped the same way."""
    t0 = time.time()
    tmp = os.path.join(task.out_dir, PARTIAL, f"{task.key.replace('/', '__')}.{uuid.uuid4().hex[:10]}")
    os.makedirs(tmp)
    result = {"key": task.key, "attempt": task.attempt, "hash": task.hash, "host": socket.gethostname(),
              "pid": None, "rc": None, "frames": None, "peak_rss_mb": None, "cpu_s": None, "error": None}
    proc = None
    try:
        setup = dict(task.setup)
        setup["settings"] = {**(setup.get("settings") or {}), "num_threads": task.threads}
        write_json_atomic(os.path.join(tmp, "setup.json"), setup, indent=2)
        env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS=str(task.threads),
                   MKL_NUM_THREADS=str(task.threads), OPENBLAS_NUM_THREADS=str(task.threads))
        env.pop("BLENDER_USER_RESOURCES", None)
        with open(os.path.join(tmp, "job.log"), "wb") as out, open(os.path.join(tmp, "job.err"), "wb") as err:
            proc = subprocess.Popen(command(task, tmp), stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                    cwd=str(ROOT), start_new_session=True,
                                    preexec_fn=_die_with_parent if _PRCTL is not None else None)
            result["pid"] = proc.pid
            deadline = time.monotonic() + task.timeout if task.timeout else None
            rc, result["peak_rss_mb"], result["cpu_s"], stop = _wait(proc, deadline, cancel)
        result["rc"] = rc
        with open(os.path.join(tmp, "job.err"), encoding="utf-8", errors="replace") as f:
            err_text = f.read()
        if stop == "cancelled":
            result.update(outcome="cancelled", error="cancelled")
        elif stop == "timeout":
            result.update(outcome="failed", error=f"timed out after {task.timeout:g} s (--job-timeout)")
        elif rc == 0:
            _finish(task, tmp, result, t0)
        else:
            result.update(outcome="failed" if rc in EXIT_STATUSES else "crashed", error=error_line(err_text, rc))
    except KeyboardInterrupt:                 # ray.cancel: stop the process, publish nothing
        if proc is not None and proc.returncode is None:
            _stop(proc)
        result.update(outcome="cancelled", error="cancelled")
    finally:
        result["seconds"] = round(time.time() - t0, 3)
        if result.get("outcome") in ("failed", "crashed"):
            _keep_failure_log(task, tmp, result)
        shutil.rmtree(tmp, ignore_errors=True)
    return result


def _finish(task: Task, tmp: str, result: dict, t0: float):
    """A job whose process exited 0: check its outputs, write job.json, publish the folder."""
    missing = [n for n in output_names(task.key, task.formats)[:-1] if not os.path.isfile(os.path.join(tmp, n))
               or (n != "setup.json" and os.path.getsize(os.path.join(tmp, n)) == 0)]
    if missing:
        result.update(outcome="failed", error=f"the retarget exited 0 but wrote no {missing[0]}")
        return
    with open(os.path.join(tmp, "report.json"), encoding="utf-8") as f:
        result["frames"] = int(json.load(f).get("frames") or 0)
    record = {"key": task.key, "hash": task.hash, "parts": task.parts, "clip": task.clip,
              "character": task.character, "action": task.action, "frames": task.frames, "formats": task.formats,
              "threads": task.threads, "attempt": task.attempt, "host": result["host"],
              "seconds": round(time.time() - t0, 3), "cpu_s": result["cpu_s"], "peak_rss_mb": result["peak_rss_mb"],
              "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    write_json_atomic(os.path.join(tmp, "job.json"), record, indent=2)
    publish(tmp, os.path.join(task.out_dir, task.key), task.out_dir)
    stale = os.path.join(task.out_dir, FAILED, task.key + ".log")
    if os.path.exists(stale):
        os.remove(stale)
    result.update(outcome="ok", error=None)


def _keep_failure_log(task: Task, tmp: str, result: dict):
    """Copy a failed job's output into OUT/failed/<key>.log (its folder is never published)."""
    path = os.path.join(task.out_dir, FAILED, task.key + ".log")
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "wb") as f:
            f.write(f"job {task.key} attempt {task.attempt}: {result['error']}\n".encode())
            for name in ("job.log", "job.err"):
                p = os.path.join(tmp, name)
                if os.path.isfile(p):
                    f.write(f"--- {name}\n".encode())
                    with open(p, "rb") as src:
                        shutil.copyfileobj(src, f)
        os.replace(path + ".tmp", path)
        result["log"] = path
    except OSError:
        pass


def task_dict(task: Task) -> dict:
    return asdict(task)
