"""The skeleton and its geometry (ReConForM §3 inputs): the canonical humanoid, rotations, forward kinematics,
linear blend skinning and the shared T-pose.

Modules: ``humanoid`` (canonical bone names and limbs), ``rotations`` (torch) and ``rotations_np`` (its numpy
twin), ``affine`` (closed-form inverses of small transforms), ``vec3`` (sums over a last axis of 3),
``kinematics`` (reference forward kinematics), ``skinning`` (reference linear blend skinning), ``chains`` (the
solver's fast FK + LBS of chosen vertices, tested against the reference), ``tpose`` (any humanoid in the shared
T-pose through its bone map), ``rehang`` (rigs whose limb ends hang elsewhere), ``parts`` (the body part of a bone
or a vertex). Nothing here knows key vertices, contacts or the solve.
"""
