"""Properties of fleet routing over in-memory members: limits hold, failures move requests,
every request is answered exactly once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from hypothesis import given, settings, strategies as st

from ollm_lite.fleet import Fleet
from ollm_lite.providers.base import BaseProvider
from ollm_lite.types import (
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    Message,
    ProviderEvent,
    ProviderRequest,
    TextEvent,
)


class Member(BaseProvider):
    """Counts what is in flight on it; ``down`` members refuse every connection."""

    name = "member"

    def __init__(self, index: int, down: bool, delay: float = 0.002) -> None:
        self.base_url = f"http://member-{index}"
        self.down = down
        self.delay = delay
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.answered: list[str] = []

    def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        if self.down:
            yield ErrorEvent(ErrorInfo(f"cannot connect to {self.base_url}", "CONNECTION_FAILED"))
            return
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            threading.Event().wait(self.delay)
            with self.lock:
                self.answered.append(request.messages[-1].text)
            yield TextEvent(self.base_url)
            yield FinishEvent("stop")
        finally:
            with self.lock:
                self.in_flight -= 1


@settings(max_examples=25, deadline=None)
@given(
    downs=st.lists(st.booleans(), min_size=1, max_size=4).filter(lambda d: not all(d)),
    per_host=st.integers(min_value=1, max_value=3),
    requests=st.integers(min_value=1, max_value=24),
)
def test_limits_hold_and_every_request_is_answered_once(
    downs: list[bool], per_host: int, requests: int
) -> None:
    members = [Member(i, down) for i, down in enumerate(downs)]
    fleet = Fleet(members, per_host=per_host, backoff=60.0)
    prompts = [f"p{i}" for i in range(requests)]

    def ask(prompt: str) -> str:
        return fleet.chat(ProviderRequest(model="m", messages=[Message.user(prompt)])).content or ""

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(ask, prompts))
    answered = sorted(p for m in members for p in m.answered)
    assert answered == sorted(prompts)  # each once, none lost, none twice
    assert all(m.peak <= per_host for m in members)
    assert all(not m.answered for m in members if m.down)
    assert all(a.startswith("http://member-") for a in answers)
    assert sum(s.in_flight for s in fleet.status()) == 0


def test_requests_wait_for_a_busy_good_endpoint_rather_than_a_dead_one() -> None:
    """A dead endpoint whose short rest keeps ending must not use up requests' tries while the
    one good endpoint is busy: every request is answered there."""
    good, dead = Member(0, down=False, delay=0.03), Member(1, down=True)
    fleet = Fleet([good, dead], per_host=1, backoff=0.001, max_backoff=0.001)

    def ask(prompt: str) -> str:
        return fleet.chat(ProviderRequest(model="m", messages=[Message.user(prompt)])).content or ""

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(ask, [f"p{i}" for i in range(16)]))
    assert answers == ["http://member-0"] * 16
