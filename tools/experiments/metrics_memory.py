"""The metrics alone on the bench's memory case: peak RSS of ``core.metrics.scores.evaluations`` (copy-rotations measured
twice against the source, as a retarget measures its result and copy-rotations) over the RSS before it, whole or
in chunks of frames (docs/solver.md "Long clips in windows").

    OMP_NUM_THREADS=1 .venv/bin/python tools/experiments/metrics_memory.py FRAMES CHUNK|none

FRAMES: the giant walk ping-pong tiled (``common.tile``) onto ``mh_female_average`` (``common.SCALING``). The peak is
VmHWM after resetting it (Linux: 5 written to /proc/self/clear_refs) just before the metrics; one thread.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))


def _status_mb(key: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    return float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("frames", type=int)
    ap.add_argument("chunk", help="frames per chunk, or 'none' (the whole clip at once)")
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    import common
    mods, src, smo, tgt = common.scaling_case(args.frames)
    print(f"source: {src.mesh.num_verts} vertices, {src.skeleton.num_bones} bones; target: {tgt.mesh.num_verts} "
          f"vertices, {tgt.skeleton.num_bones} bones")
    chunk = None if args.chunk == "none" else int(args.chunk)
    Motion = mods["core.types"].Motion
    metrics, cr, progress = (importlib.import_module(f"{common.MODULE}.core.{n}")
                             for n in ("metrics.scores", "pipeline.copy_rotations", "progress"))
    init = cr.copy_rotations(src, smo, tgt)
    init = Motion(init.rotations, init.locations, smo.fps, smo.frame_start)
    before = _status_mb("VmRSS:")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    t = time.perf_counter()
    progress.drive(metrics.evaluations(src, smo, tgt, [init, init], None, 0.0, chunk=chunk))
    peak = _status_mb("VmHWM:")
    print(json.dumps(dict(frames=args.frames, chunk=chunk, rss_before_mb=round(before), hwm_during_mb=round(peak),
                          grow_mb=round(peak - before), seconds=round(time.perf_counter() - t, 1))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
