"""The client under test, connected to a scripted provider that plays the given turns."""

from __future__ import annotations

from typing import Any

import ollm_lite
from ollm_lite import ScriptedProvider
from ollm_lite.client import Client
from ollm_lite.providers.scripted import TurnLike


def client(*turns: TurnLike, **options: Any) -> tuple[Client, ScriptedProvider]:
    """A client for model ``m`` (``options`` as given to ``connect``) and the provider it
    talks to, which records every request."""
    provider = ScriptedProvider(list(turns))
    return ollm_lite.connect(provider, model="m", **options), provider
