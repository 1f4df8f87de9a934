"""Fixtures shared by every test directory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import responses
from hypothesis import HealthCheck, settings
from responses.registries import FirstMatchRegistry, OrderedRegistry

# A property's pass must not depend on how busy the machine is: no per-example deadline (the
# default is 200 ms) and no "data generation too slow" failure. Tests keep their own
# max_examples; those that set these two themselves are unaffected.
settings.register_profile("ollm_lite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ollm_lite")


@pytest.fixture
def rsps(request: pytest.FixtureRequest) -> Iterator[responses.RequestsMock]:
    """``responses`` in charge of every ``requests`` call of the test.

    Strict by default: the registered answers are served in registration order, one per call,
    and each must be used. A module that registers several possible answers and lets the code
    pick sets ``RSPS_STRICT = False`` (any order, unused answers allowed).
    """
    strict = getattr(request.module, "RSPS_STRICT", True)
    with responses.RequestsMock(
        assert_all_requests_are_fired=strict,
        registry=OrderedRegistry if strict else FirstMatchRegistry,
    ) as mock:
        yield mock
