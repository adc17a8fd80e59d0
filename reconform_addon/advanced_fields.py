"""The solver's advanced fields as the panel shows them (Advanced, under the quality preset): one row per
``core.solver.SolverSettings`` field. ``properties`` turns each into a scene property and ``panels.solve`` draws
them; the weights and why their defaults: docs/solver.md. Plain data: nothing here imports bpy or torch.
"""

#: Advanced solver fields shown in the panel: (SolverSettings field, label, description, default, min, max).
#: Defaults here only matter until the first preset is applied; ``apply_preset`` copies the preset's values.
ADVANCED_FLOATS = (
    ("w_reg", "Regularisation", "Weight of staying close to the copied rotations", 0.3, 0.0, 1000.0),
    ("w_smooth", "Smoothness", "Weight of temporal smoothness (jerk of key vertices)", 0.5, 0.0, 1000.0),
    ("jerk_budget", "Jerk Budget", "No point of the body may move more sharply, second by second, than in copy "
     "rotations or (scaled to the target's height) in the source: a solve does not add snaps. 0 turns it off",
     40.0, 0.0, 1000.0),
    ("w_sem", "Semantics", "Global weight of the semantic terms below", 1.0, 0.0, 1000.0),
    ("w_dist", "Distance", "Key-vertex distances where the source is in contact", 2.0, 0.0, 1000.0),
    ("contact_state", "Contact State", "Each key-vertex pair in contact in the source (closer than 5 % of the "
     "height) stays in contact, and each pair apart stays apart (a factor on the distance weight; 0 turns it off)",
     1000.0, 0.0, 10000.0),
    ("w_dir", "Direction", "Key-vertex directions where the source is in contact", 1.0, 0.0, 1000.0),
    ("w_pen", "Penetration", "Signed distance along normals: avoid passing through the body", 0.5, 0.0, 1000.0),
    ("w_self_barrier", "Self Collision", "Keep each limb out of the character's own body, no deeper than in the "
     "source or in copy rotations: the hands and arms on the body's skin, not in it; and a hand that rests on the "
     "source's body kept on the target's (0 turns both off, a little faster)", 5.0, 0.0, 1000.0),
    ("w_head", "Head Attitude", "Keep each frame's head within 15 degrees of copy rotations' (turned as the "
     "source's): terms that reach the head (a partner's hand behind it, the gaze, a collision) cannot throw it back "
     "or down (0 turns it off)",
     3.0, 0.0, 1000.0),
    ("w_partner", "Partner Terms", "Partners solved together: weight of the key-vertex distances, directions and "
     "penetration between the characters, which keep their contacts. Raise it (2 to 3) for partners of very "
     "different sizes whose hold comes apart; each character's own feet and contacts give a little", 1.0, 0.0,
     1000.0),
    ("w_gaze", "Gaze", "Partners solved together: a character who looks at its partner in the source looks at it "
     "in the target (0 turns it off)", 1.0, 0.0, 1000.0),
    ("w_barrier", "Partner Collision", "Partners solved together: keep each body out of the others', no deeper "
     "than the source couple's (capsule proxies; 0 turns it off)", 1.0, 0.0, 1000.0),
    ("w_height", "Height", "Height above the floor near the ground, with the floor barrier", 1.0, 0.0, 1000.0),
    ("w_sliding", "Sliding", "Horizontal velocity of vertices near the floor: feet stay planted", 5.0, 0.0,
     1000.0),
    ("foot_lock", "Foot Lock", "Where the source foot stands still on the floor, the target's sole must not "
     "slide (a factor on the sliding weight; 0 turns it off)", 2.0, 0.0, 1000.0),
    ("foot_contact_weight", "Foot Contact", "Where the source foot is on the floor, how firmly the target's sole "
     "is held on it, instead of matching raw key-vertex heights (bodies differ in how high key vertices sit above "
     "the sole; a factor on the height weight; 0 turns it off)", 2.0, 0.0, 1000.0),
    ("lr_rot", "Rotation Step", "Adam step on the rotation residual (about radians)", 0.02, 1e-5, 1.0),
    ("lr_root", "Root Step", "Adam step on the root offset, in target heights", 0.01, 1e-5, 1.0),
)
ADVANCED_INTS = (
    ("iterations", "Iterations", "Adam steps over the whole clip (a first solve)", 120, 1, 100000),
)
#: (SolverSettings field, label, description, default).
ADVANCED_BOOLS = (
    ("compile", "Compile (CPU)", "Compile the pose map with torch.compile: faster per solve on the CPU once "
     "compiled, but the first solve of each clip length in a Blender session waits for the compilation "
     "(a minute or two); needs a C++ compiler, else the solve runs as usual", False),
)
#: Every advanced field name, in panel order.
ADVANCED_NAMES = tuple(f[0] for f in ADVANCED_INTS + ADVANCED_FLOATS + ADVANCED_BOOLS)
