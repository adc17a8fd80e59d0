"""Retarget a whole motion library: many clips onto many characters, resumable, on this machine or a Ray
cluster. Each job is the single-clip command (tools/retarget.py) in its own process; this process never imports
bpy. docs/library.md: usage, manifest, resume rules, engines, report, bench.

    .venv/bin/python tools/library.py --motions 'mocap/*.bvh' --characters 'chars/*.glb' --setup setup.json \\
        --out library_out --formats blend,fbx
    .venv/bin/python tools/library.py --manifest library.csv --out library_out --engine ray --address auto

Exit status (listed by --help; tools/motion_library/cli.py EXIT_STATUS): 0 all done; 1 bad input (one ``error:``
line); 2 bad arguments; 3 internal error; 4 some jobs
failed; 130 interrupted (run the same command again to finish).
"""

from __future__ import annotations

import pathlib
import sys
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tools.motion_library.cli import EXIT_INTERNAL, EXIT_INTERRUPTED, main  # noqa: E402


def entry() -> int:
    try:
        return main()
    except KeyboardInterrupt:          # before the runner started (reading inputs, hashing files)
        print("interrupted: nothing was started.", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as ex:
        traceback.print_exc()
        print(f"error: internal error ({type(ex).__name__}: {ex}); please report it", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(entry())
