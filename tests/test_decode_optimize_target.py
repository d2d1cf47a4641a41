"""The decode megakernel's optimisation target (examples/gpu/decode/optimize_target.py), without a GPU.

Its default candidate is the megakernel's first version, every valid candidate maps to a kernel config, combined
pipelining and unrolling is refused with the reason, and the phase roles the rules read name only regions the
kernel declares (a renamed region would silently starve a rule of its evidence).
"""

from __future__ import annotations

import pytest

pytest.importorskip("triton")


def test_the_default_is_v1_and_the_space_maps_onto_kernel_configs() -> None:
    import argus_lab
    from examples.gpu.decode.optimize_target import DEFAULT, config_of, space_configs
    from examples.gpu.decode.runner import KernelConfig

    assert config_of(DEFAULT, 132) == KernelConfig()
    assert config_of({**DEFAULT, "ctas_per_sm": 2, "splits": 4}, 132) == KernelConfig(programs=264, splits=4)
    space = argus_lab.optimize.Space.of(*_space_parts())
    valid = space.valid()
    assert len(valid) == len(space_configs(132)) == 72
    bad = argus_lab.optimize.Candidate.of({**DEFAULT, "stages": 3, "unroll": 4})
    assert "unrolled" in (space.invalid_reason(bad) or "")


def _space_parts() -> tuple[object, ...]:
    from examples.gpu.decode.optimize_target import AXES, ROLES, _invalid_params

    return AXES, ROLES, lambda c: _invalid_params(c.as_dict())


def test_the_phase_roles_name_declared_device_regions() -> None:
    from examples.gpu.decode.kernels import PHASES
    from examples.gpu.decode.optimize_target import PHASE_ROLES

    named = {r.strip() for regions in PHASE_ROLES.values() for r in regions.split(",")}
    assert named <= set(PHASES.names), named - set(PHASES.names)
    assert {n for n in PHASES.names if n.startswith("wait_")} <= named  # every barrier wait plays a role
