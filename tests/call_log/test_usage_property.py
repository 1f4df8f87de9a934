"""The count of a turn the server gave no usage for never raises, is always marked
``estimated``, and grows with the prompt and with the answer, whatever the text, the tool calls
and the provider's tokenizer (none, failing, answering nonsense, or counting)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings, strategies as st

from ollm_lite import Message, ScriptedProvider, ToolCall, Usage
from ollm_lite.call_log._usage import counted_usage
from ollm_lite.providers.base import request_chars
from ollm_lite.types import ChatResult, ProviderRequest, TextPart

TEXT = st.text(max_size=200)  # any code point, lone surrogates included


def _raises(request: ProviderRequest) -> int:
    raise RuntimeError("the tokenizer is down")


def _nonsense(request: ProviderRequest) -> Any:
    return -3


def _chars(request: ProviderRequest) -> int:
    return request_chars(request)  # a tokenizer that grows with its input


PROVIDERS = st.sampled_from(
    [
        ScriptedProvider([]),
        ScriptedProvider([], token_counter=_raises),
        ScriptedProvider([], token_counter=_nonsense),
        ScriptedProvider([], token_counter=_chars),
    ]
)
CALLS = st.lists(
    st.builds(
        ToolCall.from_arguments,
        st.just("c1"),
        st.text(min_size=1, max_size=20),
        st.dictionaries(st.text(max_size=10), st.integers() | TEXT, max_size=3),
    ),
    max_size=2,
)
REPORTED = st.sampled_from([None, Usage(), Usage(7, None, None), Usage(None, 4, None)])


@settings(max_examples=60)
@given(
    prompt=TEXT,
    system=st.none() | TEXT,
    answer=TEXT,
    thinking=st.none() | TEXT,
    calls=CALLS,
    more=TEXT,
    provider=PROVIDERS,
    reported=REPORTED,
)
def test_the_count_never_raises_is_marked_and_grows(
    prompt: str,
    system: str | None,
    answer: str,
    thinking: str | None,
    calls: list[ToolCall],
    more: str,
    provider: ScriptedProvider,
    reported: Usage | None,
) -> None:
    request = ProviderRequest("m", [Message("user", [TextPart(prompt)])], system_prompt=system)
    result = ChatResult(answer, "stop", calls, reported, thinking)
    usage = counted_usage(request, result, provider)
    assert usage is not None and usage.extra["estimated"] is True
    p, c = usage.prompt_tokens, usage.completion_tokens
    assert isinstance(p, int) and isinstance(c, int) and p >= 0 and c >= 0
    assert usage.total_tokens == p + c
    if reported is not None and reported.prompt_tokens is not None:
        assert p == reported.prompt_tokens  # what the server said is kept
    if reported is not None and reported.completion_tokens is not None:
        assert c == reported.completion_tokens

    longer_answer = counted_usage(request, replace(result, content=answer + more), provider)
    assert longer_answer is not None and longer_answer.completion_tokens is not None
    assert longer_answer.completion_tokens >= c
    longer_prompt = replace(
        request, messages=[*request.messages, Message("user", [TextPart(more)])]
    )
    grown = counted_usage(longer_prompt, result, provider)
    assert grown is not None and grown.prompt_tokens is not None and grown.prompt_tokens >= p


@settings(max_examples=30)
@given(answer=TEXT, provider=PROVIDERS)
def test_complete_usage_is_returned_untouched(answer: str, provider: ScriptedProvider) -> None:
    reported = Usage(3, 4, 7, {"timings": {"prompt_n": 3}})
    request = ProviderRequest("m", [Message("user", [TextPart("hi")])])
    assert counted_usage(request, ChatResult(answer, "stop", [], reported), provider) is reported
