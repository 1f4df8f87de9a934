"""Header values are secrets: the ``repr`` of a request (as ``ScriptedProvider.requests``
shows it) and of a call's settings shows each as ``***`` (docs/reliability.md, "Secrets and
redirects")."""

from __future__ import annotations

import ollm_lite
from ollm_lite import ScriptedProvider
from ollm_lite.chat._call_settings import CallSettings
from ollm_lite.types import Message, ProviderRequest

SECRET = "hdr-canary-REPR-'q\"uote\\d-é"


def test_a_request_repr_masks_header_values() -> None:
    """Every header value, also where a message quotes it, in any ``repr`` spelling."""
    request = ProviderRequest(
        "m", [Message.user(f"echo {SECRET}")], headers={"Authorization": SECRET, "X-Id": "a1b2"}
    )
    text = repr(request)
    assert SECRET not in text and repr(SECRET)[1:-1] not in text
    assert "'Authorization': '***'" in text and "a1b2" not in text
    assert text.startswith("ProviderRequest(model='m', messages=[Message(role='user'")
    assert request.headers == {"Authorization": SECRET, "X-Id": "a1b2"}  # the value is kept


def test_scripted_provider_requests_show_no_header_value() -> None:
    provider = ScriptedProvider(["hi"])
    with ollm_lite.connect(provider, model="m") as llm:
        llm.ask("hello", headers={"X-Key": SECRET})
    assert provider.requests[0].headers == {"X-Key": SECRET}
    assert SECRET not in repr(provider.requests) and "'X-Key': '***'" in repr(provider.requests)


def test_call_settings_repr_masks_header_values() -> None:
    text = repr(CallSettings(headers={"X-Key": SECRET}))
    assert SECRET not in text and "'X-Key': '***'" in text
