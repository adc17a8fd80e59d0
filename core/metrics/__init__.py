"""How good a retarget is, measured the same way for ReConForM and copy-rotations (ReConForM §5; definitions:
docs/metrics.md).

Modules: ``measures`` (per-frame measures of one clip over its ground: feet, penetration, contacts), ``scores``
(the metrics of a result against its source, a chunk of frames at a time: ``evaluate``, ``evaluations``),
``partners`` (the metrics between characters retargeted together, §6.1, and the body capsules they and the
solver's barrier share), ``report`` (numpy only: each metric's name, unit, better side, rounding and the verdict
lines every report prints), ``advice`` (numpy only: advice the panel shows on a finished retarget).
"""
