"""What the solve compares between source and target (ReConForM §3.2 and §4.1).

Modules: ``pose`` (the pose descriptors of key vertices: pairwise distance, direction, penetration along the
normal, height above ground, horizontal sliding velocity) and ``weights`` (the adaptive weights: W_interaction's
sparse close pairs, W_floor, the source→target mix of Eq. 2 and its α ramp).
"""
