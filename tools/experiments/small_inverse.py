"""What inverting a few dozen small transforms costs: ``np.linalg.inv`` (LAPACK on numpy's OpenBLAS thread pool)
against ``core.rig.affine.inv`` (closed form), on (34, 4, 4) bone transforms and (300, 3, 3) matrices, and the
largest difference between the two (docs/solver.md "Speed and memory").

    .venv/bin/python tools/experiments/small_inverse.py [--repeat 200]
    OPENBLAS_NUM_THREADS=1 .venv/bin/python tools/experiments/small_inverse.py      # numpy's BLAS on one thread
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args(argv)
    import numpy as np

    from core.rig.affine import inv
    rng = np.random.default_rng(0)
    affine = np.tile(np.eye(4), (34, 1, 1))
    affine[:, :3, :3] += 0.3 * rng.normal(size=(34, 3, 3))
    affine[:, :3, 3] = rng.normal(size=(34, 3))
    mats = np.eye(3) + 0.3 * rng.normal(size=(300, 3, 3))
    print(f"numpy {np.__version__}, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    for label, m in (("(34, 4, 4) affine", affine), ("(300, 3, 3)", mats)):
        row = []
        for name, f in (("np.linalg.inv", np.linalg.inv), ("core.rig.affine.inv", inv)):
            f(m)
            t = time.perf_counter()
            for _ in range(args.repeat):
                f(m)
            row.append(f"{name} {(time.perf_counter() - t) / args.repeat * 1e3:.3f} ms")
        diff = float(np.abs(np.linalg.inv(m) - inv(m)).max())
        print(f"{label}: " + ", ".join(row) + f"; largest difference {diff:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
