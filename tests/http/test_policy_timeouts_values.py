"""A provider's ``timeout=`` that is not a positive number of seconds is a ``ConfigError``, never
a bare ``ValueError``/``TypeError`` from ``float()``."""

from __future__ import annotations

import math

import pytest

from ollm_lite.errors import ConfigError
from ollm_lite.http.policy import Timeouts
from ollm_lite.providers.ollama import LocalProvider
from ollm_lite.providers.openai_compat import OpenAICompatibleProvider


@pytest.mark.parametrize("value", ["fast", "5", True, 0, -1, math.nan, math.inf, [5]])
def test_a_timeout_that_is_no_positive_number_is_a_config_error(value: object) -> None:
    with pytest.raises(ConfigError) as caught:
        Timeouts.of(value)  # type: ignore[arg-type]
    assert caught.value.code == "CONFIG_INVALID"
    for build in (LocalProvider, OpenAICompatibleProvider):
        with pytest.raises(ConfigError):
            build(timeout=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [5, 0.25, 30.0])
def test_a_positive_number_is_the_idle_limit(value: float) -> None:
    assert Timeouts.of(value).idle == value
