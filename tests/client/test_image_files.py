"""Images by path, bytes, data URL and ``ImagePart``: a regular file only, 10 MiB at most.

A path that is no regular file (a FIFO, a device, a directory, a NUL byte) is a
``ConfigError`` at once — never a wait in ``open()``, never an endless read — and ``events``
reports it as an ``ErrorEvent`` instead of raising. Whatever the form, an image holds at most
``IMAGE_LIMIT`` bytes once decoded, and at most that much plus one byte is read from a file.
"""

from __future__ import annotations

import base64
import os
import tracemalloc
from pathlib import Path

import pytest
from support.client_support import client
from support.path_support import awkward_paths, outcome_within

from ollm_lite import ChatFinishEvent, ConfigError, ErrorEvent, ImagePart, OllmError
from ollm_lite.client._inputs import IMAGE_LIMIT

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 8
#: The longest line a batch file may hold: an image at the limit must fit one, base64-encoded.
BATCH_LINE_LIMIT = 16 * 1024 * 1024


def test_a_fifo_image_is_refused_at_once_by_ask_and_events(tmp_path: Path) -> None:
    fifo = tmp_path / "photo.png"
    os.mkfifo(fifo)
    llm, provider = client("x", "x")
    caught = outcome_within(lambda: llm.ask("look", images=[fifo]), [fifo])
    assert isinstance(caught, ConfigError) and "FIFO" in caught.message
    events = outcome_within(lambda: list(llm.events("look", images=[str(fifo)])), [fifo])
    assert isinstance(events, list)
    assert isinstance(events[0], ErrorEvent) and events[0].error.code == "CONFIG_INVALID"
    assert isinstance(events[-1], ChatFinishEvent) and events[-1].reason == "error"
    assert provider.requests == []


@pytest.mark.parametrize("name", ["nul byte", "directory", "character device", "endless device"])
def test_an_awkward_image_path_is_a_config_error_and_an_error_event(
    tmp_path: Path, name: str
) -> None:
    path = awkward_paths(tmp_path).get(name)
    if path is None:
        pytest.skip(f"no {name} on this system")
    llm, provider = client("x")
    with pytest.raises(ConfigError) as caught:
        llm.ask("look", images=[path])
    assert caught.value.code == "CONFIG_INVALID"
    events = list(llm.events("look", images=[path]))
    assert [type(e) for e in events] == [ErrorEvent, ChatFinishEvent]
    assert provider.requests == []


def test_a_huge_image_file_is_refused_reading_at_most_the_limit(tmp_path: Path) -> None:
    """A 100 MiB file (sparse: it costs no disk) is refused without being read whole."""
    path = tmp_path / "huge.png"
    with path.open("wb") as file:
        file.write(PNG)
        file.truncate(100 * 1024 * 1024)
    llm, provider = client("x")
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match="10 MiB"):
            llm.ask("look", images=[path])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * 1024 * 1024
    assert provider.requests == []


def image_forms(size: int) -> dict[str, object]:
    data = PNG + b"\1" * (size - len(PNG))
    text = base64.b64encode(data).decode("ascii")
    return {
        "bytes": data,
        "data URL": f"data:image/png;base64,{text}",
        "ImagePart": ImagePart(text, "image/png"),
    }


@pytest.mark.parametrize("form", ["bytes", "data URL", "ImagePart", "path"])
def test_the_limit_is_the_same_for_every_form(tmp_path: Path, form: str) -> None:
    """An image of exactly ``IMAGE_LIMIT`` bytes is sent; one byte more is refused."""
    llm, provider = client("ok")
    for size, accepted in ((IMAGE_LIMIT, True), (IMAGE_LIMIT + 1, False)):
        if form == "path":
            image: object = tmp_path / f"{size}.png"
            Path(str(image)).write_bytes(PNG + b"\1" * (size - len(PNG)))
        else:
            image = image_forms(size)[form]
        if accepted:
            llm.ask("look", images=[image])
            sent = provider.requests[-1].messages[-1].images[0]
            assert len(base64.b64decode(sent.data)) == IMAGE_LIMIT
        else:
            with pytest.raises(ConfigError, match="10 MiB"):
                llm.ask("look", images=[image])
    assert len(provider.requests) == 1


def test_an_image_at_the_limit_fits_a_batch_line() -> None:
    encoded = len(base64.b64encode(b"\0" * IMAGE_LIMIT))
    assert encoded + 64 * 1024 < BATCH_LINE_LIMIT


@pytest.mark.parametrize(
    "part",
    [
        ImagePart("not base64!", "image/png"),
        ImagePart("", "image/png"),
        ImagePart(5, "image/png"),  # type: ignore[arg-type]
        ImagePart("aGVsbG8=", None),  # type: ignore[arg-type]
    ],
)
def test_a_malformed_image_part_is_a_config_error(part: ImagePart) -> None:
    llm, provider = client("x")
    with pytest.raises(ConfigError):
        llm.ask("look", images=[part])
    events = list(llm.events("look", images=[part]))
    assert isinstance(events[0], ErrorEvent)
    assert provider.requests == []


def test_every_awkward_path_is_refused_without_blocking(tmp_path: Path) -> None:
    paths = awkward_paths(tmp_path)
    llm, provider = client()
    for name, path in paths.items():
        outcome = outcome_within(lambda p=path: llm.ask("look", images=[p]), [paths["fifo"]])
        assert isinstance(outcome, OllmError), (name, outcome)
        assert outcome.code == "CONFIG_INVALID", name
    assert provider.requests == []
