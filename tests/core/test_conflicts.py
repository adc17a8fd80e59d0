import numpy as np
import pytest

from core.conflicts import Conflict, detect_conflicts, merge_part_weights, resolution_weights, resolve
from core.errors import CoreError
from core.solver import SolveJob, SolverSettings
from core.types import Motion
from tests.core.synth import make_humanoid, walk_motion


@pytest.fixture(scope="module")
def job():
    src = make_humanoid()
    tgt = make_humanoid(scale=0.8, girth=2.2, leg=0.8, name="fat")
    m = walk_motion(src, frames=30, clap=True)
    ratio = tgt.skeleton.rest_global[0, 2, 3] / src.skeleton.rest_global[0, 2, 3]
    j = SolveJob(src, m, tgt, Motion(m.rotations.copy(), m.locations * ratio, m.fps),
                 SolverSettings(iterations=20, num_threads=2))
    j.run()
    return j


@pytest.mark.slow
def test_conflicts_are_well_formed(job):
    found = detect_conflicts(job, threshold=-0.2)
    assert found, "a fat short target clapping should produce some conflicting gradients"
    parts = set(job.opt_parts)
    for c in found:
        assert c.body_part in parts and c.term_a != c.term_b and -1.0 <= c.cosine < -0.2
        assert 0.0 <= c.severity <= 1.0
        assert job.init_motion.frame_start <= c.frames[0] <= c.frames[1]
    assert [c.severity for c in found] == sorted([c.severity for c in found], reverse=True)
    assert len(detect_conflicts(job, threshold=-0.99)) <= len(found)


def test_resolution_weights_and_merge():
    c = Conflict("torso", "dist", "pen", -0.9, 0.8, (1, 10))
    assert resolution_weights(c, 0.5) == {("torso", "dist"): 1.0, ("torso", "pen"): 1.0}
    assert resolution_weights(c, 0.0) == {("torso", "dist"): 2.0, ("torso", "pen"): 0.0}
    with pytest.raises(CoreError):
        resolution_weights(c, 1.5)
    assert merge_part_weights({("a", "dist"): 2.0}, {("a", "dist"): 0.5, ("b", "pen"): 3.0}) == \
        {("a", "dist"): 1.0, ("b", "pen"): 3.0}


@pytest.mark.slow
def test_resolve_warm_starts_with_fewer_steps_and_moves_the_part(job):
    c = Conflict("left_hand", "dist", "pen", -0.9, 0.8, (1, 30))
    re = resolve(job, resolution_weights(c, 0.0), fraction=0.25)
    assert re.total == 5 and re.warm_start is not None
    assert re.settings.part_weights[("left_hand", "pen")] == 0.0
    res = re.run()
    assert np.isfinite(res.rotations).all()
    assert not np.allclose(res.rotations, job.result().rotations)


@pytest.mark.slow
def test_detect_requires_a_finished_solve(job):
    fresh = SolveJob(job.source, job.source_motion, job.target, job.init_motion, job.settings)
    with pytest.raises(CoreError, match="finished"):
        detect_conflicts(fresh)
