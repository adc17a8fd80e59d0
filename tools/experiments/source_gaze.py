"""Where the salsa sources look (docs/solver.md "Gaze"): for each dancer of each couple of the partner bench, how
far its gaze passes from the nearest key vertex of its partner, frame by frame, against the gaze cone's 5°
(``core.contacts.gaze.GAZE_MAX_DEG``: a gaze entry exists only within it), which of the partner's key vertices is
nearest most often, and the gaze's mean elevation above the horizon.

    .venv/bin/python tools/experiments/source_gaze.py [--frames 600] [--first 0]

Reads the sources only (their fitted bodies' key vertices, ``core.contacts.gaze``'s direction from the three head key
vertices averaged over 0.2 s, the eye at the face centre); no solve.
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import sys

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))

import common  # noqa: E402  (the bench's loader; enables the add-on)
import bench_partners as bp  # noqa: E402  (the partner bench's cases)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=600)
    ap.add_argument("--first", type=int, default=0, help="first clip frame (index)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    mods = bp.modules()
    track = mods["core.character.track"]
    gaze = importlib.import_module(f"{common.MODULE}.core.contacts.gaze")
    loader = common.Loader(mods, lambda s: None)
    print(f"angle from each dancer's gaze to the nearest key vertex of the partner ({args.frames} frames from "
          f"{args.first}); a gaze entry needs ≤ {gaze.GAZE_MAX_DEG:g}°")
    for label, lead, follow, t_lead, t_follow in bp.CASES:
        pairs = bp.load_pairs(loader, [(lead, t_lead, 0.0), (follow, t_follow, 0.0)], args.first, args.frames)
        kv = [torch.as_tensor(track.ClipTrack(src, mo).keyverts[0]) for src, mo, _ in pairs]     # (T, N, 3) each
        for me, (src, mo, _) in enumerate(pairs):
            other, names = kv[1 - me], pairs[1 - me][0].keyverts.names
            g = gaze.gaze_setup(src, mo)
            d = gaze.gaze_directions(kv[me], g, mo.fps)                                       # (T, 3) unit
            v = other - kv[me][:, g.eye][:, None]                                             # (T, N', 3)
            cos = (v * d[:, None]).sum(-1) / v.norm(dim=-1).clamp_min(1e-9)
            nearest = torch.rad2deg(torch.arccos(cos.clamp(-1.0, 1.0))).min(1)
            ang, idx = nearest.values.numpy(), nearest.indices.numpy()
            most = np.argsort(-np.bincount(idx, minlength=len(names)))[:3]
            elev = np.degrees(np.arcsin(d[:, 2].clamp(-1.0, 1.0).numpy()))
            print(f"{label} {pathlib.Path(src.name).stem}: median {np.median(ang):.1f}°, within 5° on "
                  f"{100 * np.mean(ang <= 5):.0f} % of frames, 10° {100 * np.mean(ang <= 10):.0f} %, 15° "
                  f"{100 * np.mean(ang <= 15):.0f} %; nearest most often {', '.join(names[i] for i in most)}; "
                  f"elevation mean {elev.mean():+.0f}°", flush=True)
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main)
