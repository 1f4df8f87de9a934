"""A wheel built from ``pyproject.toml`` holds every package of ``ollm_lite``.

setuptools installs only the packages listed under ``[tool.setuptools] packages``; an editable
install hides a missing entry, so the list is checked against the source tree here.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_directory_is_listed_in_pyproject() -> None:
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "ollm_lite").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert found == listed


def test_the_typing_marker_ships() -> None:
    assert (ROOT / "ollm_lite" / "py.typed").is_file()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "py.typed" in data["package-data"]["ollm_lite"]
