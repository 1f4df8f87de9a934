"""Fixtures shared by every test directory.

Every test starts from the same configuration, whatever the machine's user has set up.
``default_registry()`` and ``load_config()`` read ``~/.config/ollm/config.toml`` (or
``$OLLM_CONFIG``, ``$XDG_CONFIG_HOME``) and ``$OLLM_PROVIDER`` / ``$OLLM_MODEL``, as the command
line does; ``scripts/llamacpp.py start`` writes that file. The tests point the configuration
folder at an empty one and drop those variables, so a quick-start server left running on the
developer's machine cannot change what a test sees. Tests that want a configuration set it
themselves.

The one ``responses`` fixture (``rsps``) lives here too, and the hypothesis profile: a
property's pass must not depend on how busy the machine is.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import responses
from hypothesis import HealthCheck, settings
from responses.registries import FirstMatchRegistry, OrderedRegistry

_CONFIG_VARS = ("OLLM_CONFIG", "OLLM_PROVIDER", "OLLM_MODEL", "OLLM_LOG")

# No per-example deadline (the default is 200 ms) and no "data generation too slow" failure.
# Tests keep their own max_examples; those that set these two themselves are unaffected.
settings.register_profile("ollm_lite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ollm_lite")


@pytest.fixture(autouse=True, scope="session")
def _no_user_configuration(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("xdg-config")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CONFIG_HOME", str(folder))
        # the call log's default file too: a test never writes into the user's own log
        patch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))
        for name in _CONFIG_VARS:
            patch.delenv(name, raising=False)
        yield folder


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
