"""Regenerate core/data/template.npz: the key-vertex template (neutral body in T-pose + N=41 and N=96 sets).

    .venv/bin/python tools/make_template.py [--check]

The body is ``core.body.make_body`` with neutral parameters in T-pose; the key vertices are placed by the
definition rules of ``core.keyverts.rules`` (``core.keyverts.template.template_arrays`` builds the arrays).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.body import BodyParams, make_body  # noqa: E402
from core.keyverts.template import TEMPLATE_PATH, template_arrays  # noqa: E402


def build(params=BodyParams(name="template")) -> dict:
    """The arrays of template.npz for a neutral body with ``params``."""
    return template_arrays(*make_body(params, pose="T"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="rebuild in memory and compare with the stored file")
    args = ap.parse_args(argv)
    out = build()
    if args.check:
        with np.load(TEMPLATE_PATH) as z:
            same = all(np.array_equal(z[k], out[k]) for k in out)
        print("template.npz is up to date" if same else "template.npz differs from a fresh build")
        return 0 if same else 1
    TEMPLATE_PATH.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(TEMPLATE_PATH, **out)
    print(f"wrote {TEMPLATE_PATH.relative_to(ROOT)} ({TEMPLATE_PATH.stat().st_size / 1024:.0f} KiB, "
          f"{len(out['verts'])} vertices, {len(out['face_offsets']) - 1} faces)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
