"""Where source clips stand: their own floor (``core.contacts.ground.auto_ground``), the lowest foot point's height above
it at the first frames, and the frames copy-rotations stands the target on (``core.pipeline.copy_rotations.
standing_frames``: frame 0 when the source stands there, else the frames where it does; docs/copy_rotations.md §3).

    .venv/bin/python tools/experiments/standing.py [motions/cmu_07_01_walk.fbx ...]     # paths in ../shared/assets

Prints one line per clip (default: every motion of ../shared/assets/motions).
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("clips", nargs="*", help="source clips under ../shared/assets")
    args = ap.parse_args(argv)
    import numpy as np

    import common
    mods = common.enable_addon()
    loader = common.Loader(mods, lambda s: None)
    core = {n: importlib.import_module(f"{common.MODULE}.core.{n}") for n in ("pipeline.copy_rotations", "contacts.ground", "character.track")}
    clips = args.clips or sorted(str(p.relative_to(common.ASSETS)) for p in (common.ASSETS / "motions").iterdir()
                                 if p.suffix in (".bvh", ".fbx"))
    for rel in clips:
        src, motion, _ = loader.source(rel)
        track = core["character.track"].ClipTrack(src, motion)
        floor = core["contacts.ground"].auto_ground(track)
        above = track.lowest_foot - floor
        frames, _ = core["pipeline.copy_rotations"].standing_frames(track)
        where = "z = 0" if np.ndim(floor) == 0 else f"tracked, {100 * np.mean(floor):+.1f} cm on average"
        rule = "frame 0" if frames[0] == 0 else f"{len(frames)} standing frames from frame {frames[0]}"
        print(f"{pathlib.Path(rel).stem}: h_c {src.height:.3f} m, floor {where}; lowest foot point above it at "
              f"frames 0, 1, 2: {', '.join(f'{100 * a:+.1f}' for a in above[:3])} cm; copy-rotations stands it "
              f"on {rule}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
