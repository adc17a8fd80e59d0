"""tools/experiments/mesh_pen_parts.py: the mesh self-penetration split by part pair sums to what the metrics read,
and names the parts that meet (the synthetic clap's hands inside each other)."""

import importlib

import numpy as np
import torch

from core.character.track import ClipTrack
from core.metrics import mesh_volume as mv
from tests.core.synth import make_humanoid, walk_motion
from tools.experiments.mesh_pen_parts import pen_parts


def core(name):
    return importlib.import_module(f"core.{name}")


def test_the_split_sums_to_the_measure_and_names_the_clapping_hands():
    body = make_humanoid()
    motion = walk_motion(body, frames=40, clap=True)
    rows = pen_parts(core, body, motion)
    surf = mv.surfaces(body, body.keyverts.vertex_ids)[0]
    track = ClipTrack(body, motion)
    skin = mv.skinning(track, surf.ids)
    share = []
    with torch.no_grad():
        for _, S_rot, S_t in track.skinning_chunks(16):
            x, n = skin(S_rot, S_t)
            share.append((mv.shared_volume(surf, mv.depths(surf, x, n).double()) / surf.volume).numpy())
    measured = float(np.concatenate(share).mean())
    assert measured > 0
    assert np.isclose(sum(r[0] for r in rows.values()), measured, rtol=1e-6)
    hands = {("left_hand", "right_hand"), ("right_hand", "left_hand")}
    assert hands <= set(rows)
    for pair in hands:
        share, frames, deepest = rows[pair]
        assert share > 0 and deepest > 0 and frames and max(frames) < 40
