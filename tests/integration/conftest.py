"""Real llama.cpp servers on 127.0.0.1 for the integration suite, one per session.

The servers come from ``scripts/llamacpp.py`` (the same script the quick start and CI use):
llama-cpp-python's server (``py``: ctx 4096, ``chatml-function-calling``) and llama.cpp's own
``llama-server`` (``native``: ctx 4096 with ``--jinja``), both serving SmolLM2-135M-Instruct, plus
a second native one with ctx 512 for the token-limit tests serving Gemma 3 270M: those tests
size prompts of digits, which Gemma's tokenizer counts one token per digit (far from the
ceil(chars / 4) estimate, which is what they prove is not used). Missing builds are built on
first use (minutes);
with ``OLLM_LITE_NO_BUILD=1`` and nothing cached, the tests are skipped with a loud reason
instead. Every server is stopped at the end of the session.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import llamacpp  # scripts/ is not a package: found through the sys.path entry above

from ollm_lite.providers.openai_compat import OpenAICompatibleProvider

MODEL = llamacpp.MODEL_ALIAS
#: Per-request idle timeout: generous for a busy 2-core machine, short of hanging CI.
REQUEST_TIMEOUT_S = 60.0

_installed: dict[tuple[str, str], bool] = {}


def _no_build() -> bool:
    return os.environ.get("OLLM_LITE_NO_BUILD", "") not in ("", "0")


def _ensure_installed(kind: llamacpp.ServerKind, model: llamacpp.ModelKey) -> None:
    """Build what ``kind`` needs unless it is cached; skip loudly when it may not be built."""
    if _installed.get((kind, model)):
        return
    root = llamacpp.cache_root()
    builds = (llamacpp.SERVER_BUILD[kind], llamacpp.MODELS[model].build)
    missing = [b.name for b in builds if not b.complete(root)]
    if not llamacpp.gguf_path(root, model).is_file():
        missing.append(llamacpp.MODELS[model].file)
    if missing and _no_build():
        pytest.skip(
            f"!!! REAL llama.cpp SERVER TESTS SKIPPED: {', '.join(missing)} not built under "
            f"{root} and OLLM_LITE_NO_BUILD is set; run `python3 scripts/llamacpp.py install` !!!"
        )
    llamacpp.install(kind, models=(model,))  # a failure is an error, not a skip: CI builds them
    _installed[(kind, model)] = True


def _serve(
    kind: llamacpp.ServerKind, ctx: int, model: llamacpp.ModelKey = llamacpp.DEFAULT_MODEL
) -> Iterator[llamacpp.ServerInfo]:
    _ensure_installed(kind, model)
    info = llamacpp.start_server(kind, ctx=ctx, model=model)
    try:
        yield info
    finally:
        llamacpp.stop_server(info.pid)


@pytest.fixture(scope="session")
def llamacpp_py_server() -> Iterator[llamacpp.ServerInfo]:
    """llama-cpp-python's server: ctx 4096, ``--chat_format chatml-function-calling``."""
    yield from _serve("py", 4096)


@pytest.fixture(scope="session")
def llamacpp_native_server() -> Iterator[llamacpp.ServerInfo]:
    """llama.cpp's ``llama-server``: ``-c 4096 --jinja``."""
    yield from _serve("native", 4096)


@pytest.fixture(scope="session")
def llamacpp_native_small_ctx_server() -> Iterator[llamacpp.ServerInfo]:
    """llama.cpp's ``llama-server`` with ``-c 512`` and Gemma 3 270M (one token per digit)."""
    yield from _serve("native", 512, "gemma3")


@pytest.fixture(params=["py", "native"])
def llamacpp_server(request: pytest.FixtureRequest) -> llamacpp.ServerInfo:
    """Each test runs once against each server."""
    name = f"llamacpp_{request.param}_server"
    info: llamacpp.ServerInfo = request.getfixturevalue(name)
    return info


@pytest.fixture
def make_provider() -> Iterator[Callable[..., OpenAICompatibleProvider]]:
    """Fresh ``backend="llamacpp"`` providers (discovery runs once per instance), closed after."""
    made: list[OpenAICompatibleProvider] = []

    def make(server: Any = None, *, base_url: str | None = None) -> OpenAICompatibleProvider:
        url = base_url if base_url is not None else server.base_url
        provider = OpenAICompatibleProvider(
            base_url=url, backend="llamacpp", timeout=REQUEST_TIMEOUT_S
        )
        made.append(provider)
        return provider

    yield make
    for provider in made:
        provider.close()
