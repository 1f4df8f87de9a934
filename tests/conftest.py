"""Every test starts from the same configuration, whatever the machine's user has set up.

``default_registry()`` and ``load_config()`` read ``~/.config/ollm/config.toml`` (or
``$OLLM_CONFIG``, ``$XDG_CONFIG_HOME``) and ``$OLLM_PROVIDER`` / ``$OLLM_MODEL``, as the command
line does; ``scripts/llamacpp.py start`` writes that file. The tests point the configuration
folder at an empty one and drop those variables, so a quick-start server left running on the
developer's machine cannot change what a test sees. Tests that want a configuration set it
themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

_CONFIG_VARS = ("OLLM_CONFIG", "OLLM_PROVIDER", "OLLM_MODEL")


@pytest.fixture(autouse=True, scope="session")
def _no_user_configuration(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("xdg-config")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CONFIG_HOME", str(folder))
        for name in _CONFIG_VARS:
            patch.delenv(name, raising=False)
        yield folder
