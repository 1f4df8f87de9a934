"""Every Python snippet of README.md and docs/ runs, offline, over ScriptedProvider.

So no page can go stale: a renamed function, a misspelt option (a ``TypeError``) or a wrong
import fails here. The snippets marked ``live`` run against the real llama.cpp server as well
(tests/integration/test_script_api.py). See tests/doc_snippets.py for the directive comment.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.doc_snippets import PAGES, ROOT, Snippet, offline_connect, run, snippets

SNIPPETS = snippets()


def test_there_are_pages_with_snippets() -> None:
    assert (ROOT / "README.md") in PAGES
    assert len(SNIPPETS) >= 5


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[s.id for s in SNIPPETS])
def test_snippet_runs_offline(
    snippet: Snippet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if snippet.peer:  # another library's code: valid Python is all that can be checked here
        compile(snippet.code, snippet.id, "exec")
        return
    run(snippet, tmp_path, monkeypatch, offline_connect(snippet.directive))


def test_the_comparison_table_counts_the_scripts_shown() -> None:
    """docs/comparison.md: each cell is the non-blank line count of the snippet it names."""
    page = ROOT / "docs" / "comparison.md"
    counted: dict[tuple[str, str], int] = {}
    for snippet in snippets([page]):
        key = (snippet.directive["script"], snippet.directive["library"])
        counted[key] = snippet.lines
    header, rows = _table(page.read_text("utf-8"))
    libraries = header[1:]
    assert libraries == ["ollm_lite", "ollama-python", "openai-python", "llm"]
    for row in rows:
        if row[0] == "**total**":
            totals = [
                sum(v for (s, lib), v in counted.items() if lib == name) for name in libraries
            ]
            assert [int(c) for c in row[1:]] == totals
            continue
        assert [int(c) for c in row[1:]] == [counted[(row[0], lib)] for lib in libraries], row
    assert len(rows) == 6


def test_the_five_readme_scripts_are_five_lines_or_fewer() -> None:
    five = [s for s in snippets([ROOT / "README.md"]) if "script" in s.directive]
    assert sorted(s.directive["script"] for s in five) == sorted(FIVE)
    for snippet in five:
        assert snippet.lines <= 5, snippet.id
        assert snippet.live, snippet.id  # and each runs against the real server


FIVE = ["one-shot", "streamed", "tool-using", "typed", "two-turn"]


def _table(text: str) -> tuple[list[str], list[list[str]]]:
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    return cells[0], cells[1:]
