"""Every Python snippet of README.md and docs/ runs, offline, over ScriptedProvider.

So no page can go stale: a renamed function, a misspelt option (a ``TypeError``) or a wrong
import fails here. Each runs its visible text only, in the reader's folder after the page's
visible steps; the same snippets run against the real quick-start llama.cpp server in
tests/docs/test_doc_snippets_live.py. See tests/doc_snippets.py for the directive comment.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from support.doc_snippets import (
    PAGES,
    ROOT,
    Snippet,
    blocks,
    offline_connect,
    readers_folder,
    reading_order,
    run,
    run_test_file,
    snippets,
)

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
    if snippet.is_test_file:
        done = run_test_file(snippet, readers_folder(tmp_path))
        assert done.returncode == 0 and " passed" in done.stdout, (done.stdout, done.stderr)
        return
    run(snippet, tmp_path, monkeypatch, offline_connect(snippet.directive))


def test_every_snippet_runs_in_one_shared_folder_in_reading_order(tmp_path: Path) -> None:
    """A reader who works through README.md and then the pages it links, all in one folder,
    meets no snippet that trips over files an earlier page left (a batch file of the same
    name with other ids, a log written by an earlier run)."""
    folder = readers_folder(tmp_path)
    ordered = snippets(reading_order())
    assert {s.id for s in ordered} == {s.id for s in SNIPPETS}
    for snippet in ordered:
        if snippet.peer:
            continue
        if snippet.is_test_file:
            done = run_test_file(snippet, folder)
            assert done.returncode == 0 and " passed" in done.stdout, (snippet.id, done.stdout)
            continue
        with pytest.MonkeyPatch.context() as monkeypatch:
            try:
                run(snippet, folder, monkeypatch, offline_connect(snippet.directive))
            except Exception as exc:
                raise AssertionError(f"{snippet.id} failed in the shared folder: {exc!r}") from exc


#: What a directive may say: how to stand in for the server offline, never code or files.
DIRECTIVE_KEYS = {"turns", "fake_mcp", "needs", "peer", "script", "library", "step"}


@pytest.mark.parametrize("block", blocks(), ids=[b.id for b in blocks()])
def test_nothing_is_hidden_in_a_directive(block: Snippet) -> None:
    """No hidden set-up code or files: what runs is what the page shows."""
    assert set(block.directive) <= DIRECTIVE_KEYS, block.id
    if block.directive.get("step"):
        assert block.language in ("bash", "sh"), block.id


#: What a reader brings: the docs say so just before a snippet that uses one.
OWN_THINGS = ("cat.jpg", '"--repository", "."')


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[s.id for s in SNIPPETS])
def test_a_snippet_using_the_readers_own_files_says_so(snippet: Snippet) -> None:
    if any(thing in snippet.code for thing in OWN_THINGS):
        assert "of your own" in snippet.before, snippet.id


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[s.id for s in SNIPPETS])
def test_a_snippet_left_out_of_the_real_server_run_says_why_where_it_stands(
    snippet: Snippet,
) -> None:
    """``needs``: the page names that server in the prose above the snippet."""
    if snippet.needs:
        assert snippet.needs in snippet.before, (snippet.id, snippet.needs)


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


def test_the_cli_page_lists_every_command() -> None:
    """docs/cli.md's list of commands names each command and action the parser has."""
    from ollm_lite.cli import build_parser

    page = (ROOT / "docs" / "cli.md").read_text("utf-8")
    listing = page.split("Commands:", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    listed = {" ".join(line.split()[1:3]) for line in listing.splitlines() if line.strip()}
    listed |= {line.split()[1] for line in listing.splitlines() if line.startswith("ollm-lite")}
    for command, sub in _subcommands(build_parser()).items():
        actions = _subcommands(sub)
        wanted = [f"{command} {a}" for a in actions] if actions else [command]
        for name in wanted:
            assert name in listed, f"docs/cli.md does not list `ollm-lite {name}`"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_the_replay_example_runs_twice_in_one_folder(tmp_path: Path) -> None:
    """docs/testing.md's replay of last night's run, run again in the same folder while the
    server answers differently: it replays this run's calls, not the first run's."""
    page = ROOT / "docs" / "testing.md"
    (replay,) = [s for s in snippets([page]) if "from_log" in s.code]
    folder = readers_folder(tmp_path)
    for turns in (["Paris.", "Rome."], ["Paris, France.", "Rome, Italy."]):
        with pytest.MonkeyPatch.context() as monkeypatch:
            run(replay, folder, monkeypatch, offline_connect({"turns": turns}))
