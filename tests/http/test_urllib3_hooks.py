"""The urllib3/requests internals the transport relies on are all there.

Cancellation shuts down a request's socket from another thread, which needs urllib3 internals
(``ollm_lite/http/urllib3_hooks.py``). An upgrade that renames one must fail here, naming it,
rather than silently leave requests uncancellable.
"""

from __future__ import annotations

import pytest
import requests
import urllib3

from ollm_lite.http import urllib3_hooks


def test_the_installed_urllib3_has_every_internal_the_hooks_use() -> None:
    missing = urllib3_hooks.missing_internals()
    assert not missing, (
        f"urllib3 {urllib3.__version__} / requests {requests.__version__} lack "
        f"{', '.join(missing)}, which ollm_lite/http/urllib3_hooks.py uses: adapt the hooks "
        "to this version (cancellation and connection reuse depend on them)"
    )


@pytest.mark.parametrize(
    "entry",
    [
        ("urllib3.connection.HTTPConnection", "_renamed_new_conn"),
        ("HTTPConnection()", "_renamed_dns_host"),
        ("urllib3.util.connection", "renamed_gai_family"),
        ("urllib3.no_such_module", "anything"),
    ],
)
def test_a_missing_internal_is_named(
    entry: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check itself can fail: an internal that is not there is reported by name."""
    monkeypatch.setattr(urllib3_hooks, "REQUIRED", (*urllib3_hooks.REQUIRED, entry))
    assert urllib3_hooks.missing_internals() == [".".join(entry)]
