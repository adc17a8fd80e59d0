"""A character as the retarget uses it: completed once, and its clip evaluated once.

Modules: ``complete`` (``CharacterSpec`` → ``BuiltCharacter``: bone map, body, h_c and key vertices, ReConForM
§3–3.1), ``frame`` (the bones copy-rotations needs, foot points, hip height, the clip frame a lying rest pose is
stood up from), ``memo`` (values derived once per character object: capsules, bulges, surface fields), ``meshparts``
(which of a character's meshes form its body: props, clothing and eyes do not), ``track`` (``ClipTrack``: one
forward-kinematics pass of a clip, then world joints, feet, key-vertex paths and mesh vertices on demand, shared by
copy-rotations, the solve and the metrics).
"""
