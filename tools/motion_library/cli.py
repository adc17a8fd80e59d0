"""The library command line (``tools/library.py``); docs/library.md has the whole story.

Exit status: 0 every job is done; 1 bad input (one ``error:`` line, nothing run); 2 bad arguments; 3 internal
error; 4 some jobs failed (the others are done; rerun with --retry-failed after fixing them); 130 interrupted
(Ctrl+C or SIGTERM: nothing half-written, run the same command again to finish).
"""

from __future__ import annotations

import argparse
import os
import sys

from . import engines, inputs, progress
from .inputs import InputError
from .jobs import FORMATS
from .runner import Options, Runner

EXIT_OK, EXIT_INPUT, EXIT_ARGS, EXIT_INTERNAL, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
#: what each exit status means (--help and docs/library.md)
EXIT_STATUS = (
    (EXIT_OK, "every job is done"),
    (EXIT_INPUT, "bad input: one 'error:' line, nothing run"),
    (EXIT_ARGS, "bad arguments (usage printed)"),
    (EXIT_INTERNAL, "internal error: a traceback, then one 'error:' line; please report it"),
    (EXIT_FAILED, "some jobs failed: the others are done; fix the inputs and rerun (--retry-failed runs the "
                  "failed jobs again)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl+C or SIGTERM): nothing half-written; run the same command again to "
                       "finish"),
)
#: environment variables that cap a process's threads, read in this order
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def cores() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def env_threads():
    """The thread count the environment asks for (the first of THREAD_VARIABLES set to a whole number >= 1), or
    None."""
    for name in THREAD_VARIABLES:
        try:
            n = int(os.environ.get(name, ""))
        except ValueError:
            continue
        if n >= 1:
            return n
    return None


def memory_mb() -> float:
    """Memory available to new processes on this machine (MB), or None where it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2 ** 20
    except (ValueError, OSError, AttributeError):
        return None


def parse_args(argv):
    p = argparse.ArgumentParser(prog="library.py", description="Retarget a whole motion library: many clips onto "
                                "many characters, resumable, on this machine or a Ray cluster (docs/library.md).",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="exit status:\n" + "\n".join(f"  {code:<4} {what}" for code, what in EXIT_STATUS))
    src = p.add_argument_group("inputs (a manifest, or --motions and --characters)")
    src.add_argument("--manifest", help="JSON or CSV manifest: clip, character, action, frames, setup, name, output")
    src.add_argument("--motions", nargs="+", metavar="GLOB", help="clip files or globs (every clip onto every "
                     "character); quote globs for '**'")
    src.add_argument("--characters", nargs="+", metavar="GLOB", help="character files or globs")
    src.add_argument("--setup", help="shared JSON set-up (docs/bridge.md) with per-character overrides under "
                     "'characters' (and per-clip ones under 'clips')")
    src.add_argument("--method", choices=inputs.METHODS, help="override the set-up's method (part of each job's "
                     "folder: runs of each method live side by side)")
    src.add_argument("--quality", choices=inputs.QUALITIES, help="override the set-up's solver preset (default "
                     f"{inputs.DEFAULT_QUALITY}; part of a reconform job's folder)")
    src.add_argument("--action", help="with globs: the clips' Action (default: the one playing)")
    src.add_argument("--frames", nargs=2, type=int, metavar=("START", "END"), help="with globs: inclusive range")
    out = p.add_argument_group("outputs")
    out.add_argument("--out", required=True, help="output folder: one folder per job (<character>/<clip id>/<method>, "
                     "the method being copy_rotations or reconform-<quality>), the run log, the report")
    out.add_argument("--formats", default="blend", help=f"comma-separated outputs per job among {', '.join(FORMATS)} "
                     "(default: blend); the JSON report is always written")
    out.add_argument("--no-report", action="store_true", help="skip the HTML library report at the end")
    out.add_argument("--report-only", action="store_true", help="write the HTML report of what is done, run nothing")
    out.add_argument("--worst", type=int, default=6, help="foot-height plots for this many worst jobs (default 6)")
    run = p.add_argument_group("running")
    run.add_argument("--engine", choices=("pool", "ray"), default="pool", help="local process pool (default) or Ray")
    run.add_argument("--workers", type=int, help=f"pool: jobs at a time (default: the cores, {cores()} here, fewer "
                     "when the available memory holds fewer jobs of --job-memory)")
    run.add_argument("--threads", type=int, help="torch threads per job (default: cores / workers, at least 1, "
                     "at most OMP_NUM_THREADS (or MKL_NUM_THREADS, OPENBLAS_NUM_THREADS) when set)")
    run.add_argument("--address", help="ray: an existing cluster ('auto', or HOST:PORT); default: a local instance")
    run.add_argument("--job-memory", type=float, default=2000.0, metavar="MB",
                     help="memory a job is taken to need: Ray tasks declare it, the pool's default workers fit "
                     "in the available memory (default 2000 MB; docs/library.md has the measured peak)")
    run.add_argument("--gpus-per-job", type=float, default=1.0, help="ray: GPUs a job whose solver runs on CUDA "
                     "declares (settings.device 'cuda'; a fraction shares a GPU; default 1)")
    run.add_argument("--blender", metavar="PATH", help="run each job in this Blender binary (blender -b "
                     "--factory-startup --python-exit-code 1 --python tools/retarget.py -- ...)")
    run.add_argument("--python", metavar="PATH", help="the interpreter with the bpy module (default: this one)")
    run.add_argument("--job-timeout", type=float, metavar="S", help="a job running longer fails (default: none)")
    run.add_argument("--retry-failed", action="store_true", help="run the jobs that failed before again")
    run.add_argument("--dry-run", action="store_true", help="list what would run and why; run nothing")
    run.add_argument("--progress", choices=progress.MODES, default="auto", help="on stderr: 'bar' one progress bar "
                     "(jobs done, failed, time left; needs tqdm), 'lines' one line per finished job (for logs), "
                     "'none'; default 'auto': the bar when stderr is a terminal, else the lines")
    args = p.parse_args(argv)
    if args.manifest and (args.motions or args.characters):
        p.error("give --manifest, or --motions and --characters, not both")
    if not args.manifest and not (args.motions and args.characters) and not args.report_only:
        p.error("give --manifest FILE, or --motions GLOB... and --characters GLOB...")
    if args.manifest and (args.action or args.frames):
        p.error("--action and --frames apply to globs; a manifest gives them per row")
    args.formats = tuple(f.strip().lower().lstrip(".") for f in args.formats.split(",") if f.strip())
    bad = [f for f in args.formats if f not in FORMATS]
    if bad:
        p.error(f"--formats: '{bad[0]}' is not one of {', '.join(FORMATS)}")
    for name in ("workers", "threads"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if args.blender and not os.path.isfile(args.blender):
        p.error(f"--blender {args.blender}: no such file")
    if args.frames and args.frames[1] < args.frames[0]:
        p.error("--frames: END is before START")
    return args


def workers_and_threads(args) -> tuple:
    """(workers, threads per job). Pool: workers = cores (fewer when the available memory holds fewer jobs of
    --job-memory) and threads = cores // workers, at most the environment's (``env_threads``), unless given.
    Ray: one thread per job unless given (the cluster's CPUs / threads and its memory set how many run at
    once)."""
    n = cores()
    if args.engine == "ray":
        return 0, args.threads or 1
    mem = memory_mb()
    fit = n if mem is None else max(1, int(mem // args.job_memory))
    workers = args.workers or min(n, fit)
    threads = args.threads or min(max(1, n // workers), env_threads() or n)
    return workers, threads


def load_jobs(args) -> list:
    """[Job] from the manifest or the globs, with the shared set-up and its overrides (checked)."""
    shared = inputs.load_setup(args.setup) if args.setup else {}
    if args.method:
        shared["method"] = args.method
    if args.quality:
        shared["settings"] = {**(shared.get("settings") or {}), "quality": args.quality}
    check_settings(shared)
    used = set()
    if args.manifest:
        jobs = inputs.read_manifest(args.manifest, shared, used)
    else:
        frames = tuple(args.frames) if args.frames else None
        jobs = inputs.glob_jobs(args.motions, args.characters, shared, args.action, frames, used)
    if not jobs:
        raise InputError("The library has no jobs: the manifest lists none.")
    inputs.check_unique(jobs)
    for job in jobs:
        if job.setup is not shared:
            check_settings(job.setup, job.origin)
    unused = inputs.unused_overrides(shared, used)
    if unused:
        print(f"warning: set-up overrides matching no job: {', '.join(unused)}", file=sys.stderr)
    return jobs


_checked = {}


def check_settings(setup: dict, where: str = "set-up"):
    """The set-up's solver settings are SolverSettings fields and a known preset (else InputError), checked
    here once rather than by every job. Imports core's settings (torch), never bpy."""
    settings = dict(setup.get("settings") or {})
    key = repr(sorted(settings.items()))
    if not settings or key in _checked:
        return
    from core.errors import CoreError
    from core.solver.settings import SolverSettings
    quality = settings.pop("quality", "balanced")
    try:
        SolverSettings.preset(quality, **settings)
    except (TypeError, CoreError) as ex:
        raise InputError(f"{where}: settings: {ex}") from None
    _checked[key] = True


def print_plan(plan, stream=sys.stdout):
    """--dry-run: one line per job (status, key, reason), then the counts."""
    counts = {}
    for p in plan:
        label = "failed before" if p.status == "failed" else p.status
        counts[label] = counts.get(label, 0) + 1
        verb = "run " if p.runs else "skip"
        stream.write(f"{verb}  {label:<13} {p.task.key}  ({p.reason})\n")
    stream.write(f"{sum(p.runs for p in plan)} of {len(plan)} jobs would run: "
                 + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + "\n")


def make_engine(args, threads: int, workers: int):
    if args.engine == "ray":
        try:
            return engines.RayEngine(args.address, threads, args.job_memory, args.gpus_per_job)
        except ImportError:
            raise InputError("--engine ray needs Ray: pip install -r requirements-ray.txt") from None
    return engines.LocalPool(workers)


def main(argv=None, stream=None, tty=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    err = sys.stderr if stream is None else stream
    try:
        if args.report_only:
            return write_report(args, None, err)
        if args.progress == "bar" and progress.tqdm_class() is None:
            raise InputError("--progress bar needs tqdm: pip install -r requirements-library.txt")
        jobs = load_jobs(args)
        workers, threads = workers_and_threads(args)
        if args.engine == "pool" and workers * threads > cores():
            print(f"note: {workers} workers x {threads} threads > {cores()} cores: oversubscribed "
                  "(docs/library.md measures what that costs)", file=err)
        runner = Runner(args.out, jobs, Options(args.formats, threads, args.python, args.blender, args.job_timeout,
                                                args.retry_failed), stream=err, tty=tty, progress=args.progress)
        plan = runner.plan(save_hashes=not args.dry_run)
        if args.dry_run:
            print_plan(plan, sys.stdout if stream is None else stream)
            return EXIT_OK
        todo = sum(p.runs for p in plan)
        engine = make_engine(args, threads, workers) if todo else engines.LocalPool(1)   # nothing to start
        describe = engine.describe() if todo else "nothing to run"
        print(f"[library] {len(plan)} jobs: {todo} to run, {sum(p.status == 'done' for p in plan)} done before, "
              f"{sum(p.status == 'failed' and not p.runs for p in plan)} failed before; {describe}, "
              f"{threads} thread{'s' * (threads > 1)} per job", file=err)
        summary = runner.run(plan, engine, describe)
    except InputError as ex:
        print(f"error: {ex}", file=err)
        return EXIT_INPUT
    if not args.no_report and not summary.interrupted:
        write_report(args, plan, err)
    return finish(summary, args, err)


def finish(s, args, err) -> int:
    """The closing lines and the exit status."""
    if s.interrupted:
        print(f"interrupted: {s.ok} done, {s.cancelled} cancelled, {s.not_started} not started; nothing "
              f"half-written; run the same command again to finish.", file=err)
        return EXIT_INTERRUPTED
    held = f", {s.held} failed before (not retried: --retry-failed)" if s.held else ""
    print(f"[library] finished in {s.seconds:.1f} s: {s.ok} done now, {s.skipped} done before, {s.failed} failed"
          f"{held}; log {os.path.join(os.path.abspath(args.out), 'library_log.jsonl')}", file=err)
    for key, error in s.failures[:20]:
        print(f"  failed {key}: {error}", file=err)
    if len(s.failures) > 20:
        print(f"  ... and {len(s.failures) - 20} more (the log lists them)", file=err)
    return EXIT_FAILED if s.failed or s.held else EXIT_OK


def write_report(args, plan, err) -> int:
    """The HTML library report of the output folder (``report.py``)."""
    from . import report
    path = report.write(args.out, plan, worst=args.worst)
    print(f"[library] report {path}", file=err)
    return EXIT_OK
