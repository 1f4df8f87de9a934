"""The public surface: every name in __all__ resolves, sorted, and importing is cheap."""

from __future__ import annotations

import subprocess
import sys

import ollm_lite


def test_all_is_sorted_casefold() -> None:
    """httpx's guard: __all__ is sorted so additions are reviewed in one place."""
    assert ollm_lite.__all__ == sorted(ollm_lite.__all__, key=str.casefold)


def test_every_exported_name_resolves() -> None:
    """Each name in __all__ is importable from the package root."""
    for name in ollm_lite.__all__:
        assert getattr(ollm_lite, name) is not None, name
        module = getattr(getattr(ollm_lite, name), "__module__", "ollm_lite")
        assert module.startswith("ollm_lite"), (name, module)


def test_unknown_attribute_is_attribute_error() -> None:
    """A missing name raises AttributeError, not ImportError."""
    try:
        ollm_lite.does_not_exist  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError:
        pass
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_import_runs_nothing_heavy() -> None:
    """`import ollm_lite` loads neither requests nor any provider until one is used."""
    code = (
        "import sys, ollm_lite; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('requests', 'urllib3', 'ollm_lite')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "requests" not in out and "urllib3" not in out
    assert "ollm_lite.providers" not in out
