"""`make bench` (library part): 12 library jobs (3 clips x 4 characters from ../shared/assets, 300 frames each)
run by the library runner with 1 and 2 local workers, with Ray on a local instance, and oversubscribed (2
workers x 2 threads); jobs per minute, frames per second, Ray's overhead against the pool, the fixed cost of a
job's process and Ray's own per-task cost. Prints a table and writes bench_output/library_bench.md.

    .venv/bin/python tools/bench/bench_library.py [--quick] [--configs pool1,pool2,ray2,pool2x2] [--quality fast]

Each configuration writes into a fresh folder (nothing is skipped). The load average is printed next to each
run: on a shared machine compare the configurations of one run, never figures from different runs.
"""

from __future__ import annotations

import argparse
import io
import os
import pathlib
import platform
import shutil
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tools.motion_library import engines, inputs  # noqa: E402
from tools.motion_library.cli import cores  # noqa: E402
from tools.motion_library.runner import Options, Runner  # noqa: E402

ASSETS = pathlib.Path(os.environ.get("RECONFORM_ASSETS", ROOT.parent / "shared" / "assets"))
CLIPS = ("motions/NC_bandai_kick_normal_001.bvh", "motions/NC_bandai_slash_normal_001.bvh",
         "motions/cmu_salsa_60_15_lead.bvh")
CHARACTERS = ("characters/mh_male_heavy.glb", "characters/mh_female_curvy_mixamorig.glb",
              "characters/mh_teen_girl.glb", "characters/mh_female_thin_tall.glb")
#: name -> (engine, workers, threads per job)
CONFIGS = {"pool1": ("pool", 1, 2), "pool2": ("pool", 2, 1), "ray2": ("ray", 2, 1), "pool2x2": ("pool", 2, 2)}


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def run_config(name, jobs, base, log):
    kind, workers, threads = CONFIGS[name]
    out = os.path.join(base, name)
    shutil.rmtree(out, ignore_errors=True)
    runner = Runner(out, jobs, Options(("blend",), threads), stream=io.StringIO(), tty=False)
    plan = runner.plan()
    before = load()
    t = time.perf_counter()
    engine = engines.RayEngine(None, threads, 3000.0, local_cpus=cores()) if kind == "ray" \
        else engines.LocalPool(workers)
    t_engine = time.perf_counter() - t
    s = runner.run(plan, engine)
    wall = time.perf_counter() - t
    after = load()
    if s.failed:
        log(f"  {name}: {s.failed} jobs failed: {s.failures[:2]}")
    job_s = [r["seconds"] for r in _ends(out) if r.get("outcome") == "ok"]
    rss = [r["peak_rss_mb"] for r in _ends(out) if r.get("peak_rss_mb")]
    cpu = [r["cpu_s"] for r in _ends(out) if r.get("outcome") == "ok" and r.get("cpu_s")]
    row = dict(name=name, engine=kind, workers=workers, threads=threads, ok=s.ok, failed=s.failed, wall=wall,
               frames=s.frames, jobs_min=60.0 * s.ok / wall, fps=s.frames / wall, start_s=t_engine,
               job_mean=sum(job_s) / max(len(job_s), 1), cpu_mean=sum(cpu) / max(len(cpu), 1),
               rss_max=max(rss or [0]), load=f"{before} -> {after}")
    log(f"  {name}: {s.ok} ok in {wall:.1f} s, {row['jobs_min']:.2f} jobs/min, {row['fps']:.1f} frames/s, "
        f"mean job {row['job_mean']:.1f} s ({row['cpu_mean']:.1f} CPU s), peak memory {row['rss_max']:.0f} MB (load {row['load']})")
    return row


def _ends(out):
    from tools.motion_library.progress import read_events
    return [e for e in read_events(os.path.join(out, "library_log.jsonl")) if e.get("event") == "end"]


def ray_task_cost(n=200) -> tuple:
    """(seconds to start a local Ray instance, seconds per no-op task round trip over ``n`` tasks)."""
    import ray
    t = time.perf_counter()
    ray.init(num_cpus=cores(), include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    start = time.perf_counter() - t

    @ray.remote(num_cpus=1)
    def noop(i):
        return i

    ray.get([noop.remote(i) for i in range(10)])
    t = time.perf_counter()
    ray.get([noop.remote(i) for i in range(n)])
    per = (time.perf_counter() - t) / n
    ray.shutdown()
    return start, per


def fixed_cost(base) -> tuple:
    """(wall s, CPU s) of a 2-frame copy-rotations job (process start, imports, file reads, outputs)."""
    jobs = inputs.glob_jobs([str(ASSETS / CLIPS[0])], [str(ASSETS / CHARACTERS[2])], {}, frames=(1, 2))
    out = os.path.join(base, "fixed")
    runner = Runner(out, jobs, Options(("blend",), 1), stream=io.StringIO(), tty=False)
    runner.run(runner.plan(), engines.LocalPool(1))
    end = _ends(out)[-1]
    return end["seconds"], end["cpu_s"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="1 clip x 2 characters, 60 frames")
    p.add_argument("--configs", default="pool1,pool2,ray2,pool2x2")
    p.add_argument("--quality", default="fast", choices=("fast", "balanced", "best"))
    p.add_argument("--frames", type=int, default=300)
    p.add_argument("--out", default=str(ROOT / "bench_output"))
    args = p.parse_args(argv)
    clips, chars, frames = (CLIPS[:1], CHARACTERS[:2], 60) if args.quick else (CLIPS, CHARACTERS, args.frames)
    setup = {"method": "reconform", "settings": {"quality": args.quality}}
    jobs = inputs.glob_jobs([str(ASSETS / c) for c in clips], [str(ASSETS / c) for c in chars], setup,
                            frames=(1, frames))
    base = tempfile.mkdtemp(prefix="library_bench_")
    lines = []

    def log(msg):
        print(msg, flush=True)
        lines.append(msg)

    log(f"# Library bench ({time.strftime('%Y-%m-%d %H:%M %Z')})")
    log(f"{len(jobs)} jobs ({len(clips)} clips x {len(chars)} characters, {frames} frames each, reconform "
        f"'{args.quality}'); {cores()} cores, {platform.processor() or platform.machine()}; load {load()}")
    fixed, fixed_cpu = fixed_cost(base)
    log(f"fixed cost of one job (2-frame copy-rotations: process, bpy + torch imports, file imports, outputs): "
        f"{fixed:.1f} s wall, {fixed_cpu:.1f} s CPU")
    rows = [run_config(name, jobs, base, log) for name in args.configs.split(",")]
    start, per = ray_task_cost()
    log(f"Ray alone: local instance start {start:.1f} s; a no-op task round trip {1000 * per:.1f} ms")
    log("")
    log("| run | workers x threads | jobs ok | wall s | jobs/min | frames/s | mean job s | mean job CPU s | peak MB "
        "| load 1/5/15 |")
    log("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        log(f"| {r['name']} ({r['engine']}) | {r['workers']} x {r['threads']} | {r['ok']}/{len(jobs)} | "
            f"{r['wall']:.1f} | {r['jobs_min']:.2f} | {r['fps']:.1f} | {r['job_mean']:.1f} | {r['cpu_mean']:.1f} | "
            f"{r['rss_max']:.0f} | "
            f"{r['load']} |")
    by = {r["name"]: r for r in rows}
    if "pool2" in by and "ray2" in by:
        d = by["ray2"]["wall"] - by["pool2"]["wall"]
        log(f"\nRay against the pool (2 at a time): {d:+.1f} s over {len(jobs)} jobs "
            f"({100 * d / by['pool2']['wall']:+.1f} %, {d / len(jobs) * 2:+.2f} s per job slot)")
    if "pool2" in by and "pool2x2" in by:
        log(f"oversubscribed (2 workers x 2 threads on {cores()} cores) against 2 x 1: wall x"
            f"{by['pool2x2']['wall'] / by['pool2']['wall']:.2f}, mean job x"
            f"{by['pool2x2']['job_mean'] / by['pool2']['job_mean']:.2f}")
    if "pool1" in by and "pool2" in by:
        log(f"2 workers x 1 thread against 1 worker x 2 threads: wall x{by['pool2']['wall'] / by['pool1']['wall']:.2f}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "library_bench.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
