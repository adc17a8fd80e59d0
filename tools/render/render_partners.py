"""Render a salsa couple retargeted onto partners of contrasting sizes, headless, to look at the hands: three
copies of the target couple at one frame, copy-rotations placed together, each character solved alone, the
joint solve (ReConForM §6.1), one picture each (``partners_salsa<case>_{copy,alone,joint}.png``).

    .venv/bin/python tools/render/render_partners.py [--out docs/img] [--case 15] [--frames 120 480] [--quality FAST]

The frame shown is the one where the source's hands touch the partner most (most source hand-to-partner
contact entries, docs/metrics.md "Partners"), unless ``--show-frame`` is given. Workbench engine, as
tools/render/render_docs.py; the sources (BVH skeletons) are not drawn. Prints the partner metrics of the three.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "render"))

import render_docs as rd  # noqa: E402  (Workbench set-up, camera, colours; imports bpy)
from render_docs import bpy, mod, np  # noqa: E402

import bench_partners  # noqa: E402  (the bench's cases)

COLOURS = {"copy": (0.72, 0.72, 0.70, 1), "alone": (0.55, 0.62, 0.75, 1), "joint": (0.85, 0.66, 0.52, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "docs" / "img")
    ap.add_argument("--assets", type=pathlib.Path, default=ROOT.parent / "shared" / "assets")
    ap.add_argument("--case", default="15", choices=("01", "05", "15"))
    ap.add_argument("--frames", nargs=2, type=int, default=(120, 480), metavar=("FIRST", "COUNT"),
                    help="first clip frame (index) and frame count")
    ap.add_argument("--show-frame", type=int, default=None, help="clip frame index to render")
    ap.add_argument("--quality", default="FAST", choices=("FAST", "BALANCED", "BEST"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rd.enable_addon()
    rd.memoise_transfer()
    bpy.ops.wm.read_homefile(use_empty=True)
    rd.setup_render(960, 420)
    bridge, pipeline = mod("reconform_addon.bridge"), mod("reconform_addon.pipeline")
    rt, grp, mp = mod("core.pipeline.retarget"), mod("core.pipeline.group"), mod("core.metrics.partners")
    solver = mod("core.solver")
    label, lead, follow, t_lead, t_follow = next(c for c in bench_partners.CASES if c[0].endswith(args.case))
    first, count = args.frames
    pairs = []
    for clip, target in ((lead, t_lead), (follow, t_follow)):
        src_arm = bridge.find_armature(bridge.import_file(str(args.assets / clip)))
        src = pipeline.prepare_character(src_arm, keyvert_count=41, fit_body=True)
        mo = bridge.read_motion(src_arm, src.skeleton).slice(first, first + count)
        tgt = pipeline.prepare_character(rd.import_character(args.assets / target), keyvert_count=41)
        pairs.append((src, mo, tgt))
    settings = solver.SolverSettings.preset(args.quality.lower())
    opts = rt.RetargetOptions(settings=settings, conflicts=False)
    joint = grp.run_group(grp.RetargetGroup(pairs, opts))
    tracks = [m.source_track for m in joint.members]
    alone = [rt.run(rt.Retarget(s, m, t, dataclasses.replace(opts, init_motion=member.init_motion, metrics=False),
                                source_track=tr)).motion
             for (s, m, t), member, tr in zip(pairs, joint.members, tracks)]
    results = {"copy": [m.init_motion for m in joint.members], "alone": alone, "joint": joint.motions}
    metrics = {k: mp.evaluate_partners(tracks, [(t, mo) for (_, _, t), mo in zip(pairs, v)]) for k, v in results.items()}
    # the frame with the most source hand-to-partner contacts
    show = args.show_frame
    if show is None:
        kv = [tr.keyverts[0] for tr in tracks]
        limbs = [np.asarray(p[0].keyverts.limbs) for p in pairs]
        d = np.linalg.norm(kv[0][:, :, None] - kv[1][:, None], axis=-1)
        hand = np.isin(limbs[0], mp.HAND_LIMBS)[:, None] | np.isin(limbs[1], mp.HAND_LIMBS)[None, :]
        close = (d < 0.05 * 0.5 * (pairs[0][0].height + pairs[1][0].height)) & hand[None]
        show = int(np.argmax(close.sum((1, 2))))
    # three copies of the target couple, moved apart along X, each with its motions
    spacing = 6.0
    arms = {}
    for k, (key, motions) in enumerate(results.items()):
        for (_, _, tgt), mo, target_file in zip(pairs, motions, (t_lead, t_follow)):
            arm = rd.import_character(args.assets / target_file)
            skel = bridge.read_skeleton(arm)
            act = bridge.write_motion(arm, skel, mo, f"{key} {arm.name}")
            bridge.assign_action(arm, act)
            for o in [arm] + bridge.find_meshes(arm):
                if o.parent is None:
                    o.location.x += (k - 1) * spacing
            rd.colour_character(arm, COLOURS[key])
            arms.setdefault(key, []).append(arm)
    bpy.context.scene.frame_set(int(joint.members[0].motion.frame_start + show))
    args.out.mkdir(parents=True, exist_ok=True)
    for key, couple in arms.items():   # one picture per method, framing its couple (seen from the side, -Y)
        heads = np.array([np.array(a.matrix_world) @ np.append(a.pose.bones[0].head, 1.0) for a in couple])[:, :3]
        centre = heads.mean(0)
        rd.camera((centre[0], centre[1], 1.05), max(2.6, np.ptp(heads[:, 0]) + 1.4), 2.3, elevation=8.0)
        rd.render(args.out / f"partners_salsa{args.case}_{key}.png")
    print(f"{label}, clip frame {first + show} (index {show} of the window), quality {args.quality}:")
    for key in results:
        m = metrics[key]
        print(f"  {key}: partner contact F1 {m['partner_contact_f1']:.3f}, hand-partner error "
              f"{100 * m['hand_partner_error_mean']:.2f} % h, partner penetration {100 * m['partner_pen_mean']:.3f} %, "
              f"gaze error {m['gaze_angle_error_mean']:.1f}°")
    print(f"total {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    import extension
    extension.exit_after(main, sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:])
