"""Where library jobs run. Both engines run the same ``jobs.run_job`` and answer the runner the same way:

    engine.capacity() -> how many jobs to keep in flight     engine.submit(task)
    engine.wait(timeout) -> [(task, result dict)]             engine.in_flight() -> int
    engine.cancel() (Ctrl+C: stop what runs, publish nothing)  engine.close()

``LocalPool``: on this machine, ``workers`` job processes at a time (a thread waits on each).
``RayEngine``: each job a Ray task (``ray.remote`` with its resources declared: CPUs = the job's torch threads,
memory, GPUs when the job's solver runs on CUDA), on an existing cluster (``address``: 'auto' or HOST:PORT) or
on a local Ray instance; the code reaches the workers as Ray's ``working_dir`` runtime environment. Ray is
optional: it is imported only here, only when asked for. When the caller has already connected to Ray
(``ray.init`` in a test or a notebook), that connection is used as it is: its runtime environment must give the
workers this checkout (a local instance does: its workers get the driver's ``sys.path``), and its logging is left
alone. When the engine calls ``ray.init`` itself, Ray's start-up notices that a library user cannot act on are
kept off stderr (``quiet_ray_start``); Ray's errors and its other warnings still show.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from concurrent import futures

from .jobs import ROOT, run_job

#: what a Ray worker needs of the checkout (the rest is left out of the uploaded working_dir)
CODE_ENTRIES = ("__init__.py", "blender_manifest.toml", "core", "reconform_addon", "tools")
#: Ray's own default working_dir excludes (ray_constants.RAY_RUNTIME_ENV_DEFAULT_EXCLUDES), named in our excludes
#: so that Ray need not add them itself (it warns about each one it finds when it does)
RAY_DEFAULT_EXCLUDES = (".git", ".venv", "venv", "__pycache__")
#: Ray's start-up notices that say nothing a library user can act on: (logger, start of the message). Dropped
#: only while the engine's own ``ray.init`` runs; anything else Ray logs at WARNING or above still shows.
RAY_NOISE = (
    # a local instance turns on Ray's token authentication (its default for a new cluster) and says so each time
    ("ray._private.authentication.authentication_token_setup", "Token authentication is enabled"),
    # a container's small /dev/shm: the object store moves to /tmp, slower for large objects; a library's tasks
    # pass a few kilobytes each (a Task, a result dict)
    ("ray._private.services", "WARNING: The object store is using"),
)


def _internal_error(task, ex) -> dict:
    return {"key": task.key, "attempt": task.attempt, "hash": task.hash, "outcome": "failed", "rc": None,
            "error": f"internal error in the job runner ({type(ex).__name__}: {ex}); please report it",
            "seconds": None, "frames": None}


class LocalPool:
    """``workers`` jobs at a time on this machine, each in its own process."""

    name = "pool"

    def __init__(self, workers: int):
        self.workers = max(1, int(workers))
        self._pool = futures.ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="library-job")
        self._cancel = threading.Event()
        self._running = {}

    def describe(self) -> str:
        return f"local pool, {self.workers} worker{'s' * (self.workers > 1)}"

    def capacity(self) -> int:
        return self.workers

    def in_flight(self) -> int:
        return len(self._running)

    def submit(self, task):
        self._running[self._pool.submit(run_job, task, self._cancel)] = task

    def wait(self, timeout: float) -> list:
        if not self._running:
            return []
        done, _ = futures.wait(list(self._running), timeout, futures.FIRST_COMPLETED)
        out = []
        for fut in done:
            task = self._running.pop(fut)
            try:
                out.append((task, fut.result()))
            except Exception as ex:          # a bug in run_job itself, never the retarget's failure
                out.append((task, _internal_error(task, ex)))
        return out

    def cancel(self):
        self._cancel.set()

    def close(self):
        self._pool.shutdown(wait=True, cancel_futures=True)


def _ray_job(task) -> dict:
    """The Ray task: one job (``ray.cancel`` raises KeyboardInterrupt in it; run_job then stops the job)."""
    return run_job(task)


def runtime_env(root=ROOT) -> dict:
    """Ray's working_dir runtime environment: the checkout's code, nothing else (no outputs, no venv)."""
    return {"working_dir": str(root),
            "excludes": [f"/{n}" for n in sorted(os.listdir(root)) if n not in CODE_ENTRIES]
            + list(RAY_DEFAULT_EXCLUDES) + ["*.blend", "*.blend1"]}


class _DropRayNoise(logging.Filter):
    """Drops the records of RAY_NOISE (on the logger that prints them)."""

    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def filter(self, record) -> bool:
        return not record.getMessage().startswith(self.prefix)


@contextlib.contextmanager
def quiet_ray_start():
    """Around the engine's own ``ray.init``: Ray's known start-up noise kept off stderr, through Ray's settings
    where it has one and a logging filter where it has none. ``RAY_OVERRIDE_RUNTIME_ENV_DEFAULT_EXCLUDES`` is
    emptied (``runtime_env`` already names Ray's default excludes, so the upload is the same, without a warning
    per excluded folder found), and the RAY_NOISE records are dropped. Both are undone on leaving: a later Ray
    connection in this process is left as Ray makes it."""
    name = "RAY_OVERRIDE_RUNTIME_ENV_DEFAULT_EXCLUDES"
    before = os.environ.get(name)
    os.environ[name] = ""
    filters = [(logging.getLogger(logger), _DropRayNoise(prefix)) for logger, prefix in RAY_NOISE]
    for logger, f in filters:
        logger.addFilter(f)
    try:
        yield
    finally:
        for logger, f in filters:
            logger.removeFilter(f)
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


class RayEngine:
    """Each job a Ray task with declared resources, on an existing cluster or a local Ray instance."""

    name = "ray"

    def __init__(self, address: str = None, threads: int = 1, memory_mb: float = 2000.0, gpus_per_job: float = 1.0,
                 local_cpus: int = None):
        import ray

        self.ray = ray
        self.threads = max(1, int(threads))
        self.memory = int(memory_mb * 2 ** 20)
        self.gpus_per_job = float(gpus_per_job)
        self._owns = not ray.is_initialized()
        if self._owns:
            # the code reaches every worker as the job's working_dir (Ray uploads it once per run)
            # (log_to_driver=False: the workers' output, the raylet's and the GCS's logs stay in Ray's log files;
            # a job's own output is in its job.log / job.err)
            kw = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING,
                      runtime_env=runtime_env())
            with quiet_ray_start():
                if address:
                    ray.init(address=address, **kw)
                else:
                    ray.init(num_cpus=local_cpus, **kw)
        self._remote = ray.remote(_ray_job)
        self._running = {}
        self._capacity = None

    def describe(self) -> str:
        res = self.ray.cluster_resources()
        nodes = len([n for n in self.ray.nodes() if n.get("Alive")])
        return (f"Ray, {nodes} node{'s' * (nodes > 1)}, {res.get('CPU', 0):g} CPUs, "
                f"{res.get('GPU', 0):g} GPUs; each job {self.threads} CPU, {self.memory / 2 ** 20:.0f} MB")

    def capacity(self) -> int:
        """Jobs the cluster can run at once: its CPUs / the job's CPUs, and its memory / the job's memory."""
        res = self.ray.cluster_resources()
        by_cpu = int(res.get("CPU", 1) // self.threads)
        by_mem = int(res.get("memory", self.memory) // self.memory)
        return max(1, min(by_cpu, by_mem))

    def in_flight(self) -> int:
        return len(self._running)

    def submit(self, task):
        gpus = self.gpus_per_job if task.extra.get("cuda") else 0
        ref = self._remote.options(num_cpus=self.threads, memory=self.memory, num_gpus=gpus, max_retries=0,
                                   name=f"reconform {task.key}").remote(task)
        self._running[ref] = task

    def wait(self, timeout: float) -> list:
        if not self._running:
            return []
        refs = list(self._running)
        ready, rest = self.ray.wait(refs, num_returns=1, timeout=timeout, fetch_local=True)
        if ready and rest:
            more, _ = self.ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        out = []
        for ref in ready:
            task = self._running.pop(ref)
            out.append((task, self._result(task, ref)))
        return out

    def _result(self, task, ref) -> dict:
        ex_mod = self.ray.exceptions
        base = {"key": task.key, "attempt": task.attempt, "hash": task.hash, "rc": None, "seconds": None,
                "frames": None}
        try:
            return self.ray.get(ref)
        except ex_mod.TaskCancelledError:
            return {**base, "outcome": "cancelled", "error": "cancelled"}
        except (ex_mod.WorkerCrashedError, ex_mod.NodeDiedError, ex_mod.OutOfMemoryError,
                ex_mod.LocalRayletDiedError) as ex:
            return {**base, "outcome": "crashed", "error": f"the Ray worker died ({type(ex).__name__})"}
        except ex_mod.RayError as ex:
            return {**base, "outcome": "failed",
                    "error": f"Ray could not run the job: {str(ex).strip().splitlines()[0] if str(ex).strip() else ex}"}

    def cancel(self):
        for ref in list(self._running):
            self.ray.cancel(ref, force=False)

    def close(self):
        for ref in list(self._running):
            self.ray.cancel(ref, force=True)
        self._running.clear()
        if self._owns:
            self.ray.shutdown()
