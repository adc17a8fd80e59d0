"""Contacts with the world and with other characters (ours, ReConForM §6.1 and §6.2).

Modules: ``feet`` (which vertices are a foot, sole points, each foot's lowest point and velocity), ``ground``
(the source clip's floor: one level or one per frame), ``terrain/`` (the target's non-flat ground as a
differentiable height field, sampled from a ground object, §6.2), ``partners`` (key-vertex pairs between
characters, §6.1) and ``gaze`` (where each character looks, §6.1). The solver's terms that use them live in
``core.solver``; the metrics that score them in ``core.metrics``.
"""
