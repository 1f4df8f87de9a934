"""Every path a batch is handed (input, output, ``batch make``'s prompts and output): a bad one
is a BatchFileError at once, never a foreign exception or a read that blocks; and ``batch
make`` reads long CSV fields up to the line limit without changing ``csv`` for the caller."""

from __future__ import annotations

import csv
import os
import stat
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from support.batch_support import EchoBackend, client_for, write_prompts

from ollm_lite.batch import BatchFileError, make_input, run_batch
from ollm_lite.batch._format import MAX_LINE, parse_input


def _bad_paths(root: Path) -> dict[str, str]:
    fifo = root / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    return {
        "nul": str(root / "a\x00b"),
        "directory": str(root),
        "fifo": str(fifo),
        "device": os.devnull,
        "missing parent": str(root / "no" / "such" / "file"),
    }


def _at_once(call: Callable[[], object], fifo: str) -> BaseException | None:
    """Run ``call`` on a thread; a call blocked in a FIFO's ``open`` is freed and reported."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(20)
    if thread.is_alive():  # blocked on the FIFO: give it a writer so the thread can end
        fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        os.close(fd)
        thread.join(20)
        pytest.fail("the call blocked on a FIFO")
    return outcome[0]


KINDS = ["nul", "directory", "fifo", "device", "missing parent"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("role", ["input", "output", "prompts", "make output"])
def test_a_bad_path_is_a_batch_file_error_at_once(tmp_path: Path, role: str, kind: str) -> None:
    """NUL, a directory, a FIFO, a device or a missing parent: refused, nothing sent."""
    paths = _bad_paths(tmp_path)
    bad = paths[kind]
    inp = write_prompts(tmp_path / "in.jsonl", ["a"])
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("a\n", encoding="utf-8")
    backend = EchoBackend()
    calls: dict[str, Callable[[], object]] = {
        "input": lambda: run_batch(bad, tmp_path / "o.jsonl", client=client_for(backend)),
        "output": lambda: run_batch(inp, bad, client=client_for(backend)),
        "prompts": lambda: make_input(bad, str(tmp_path / "made.jsonl")),
        "make output": lambda: make_input(str(prompts), bad),
    }
    if role == "make output" and kind == "device":  # a device of our own: never /dev/null
        if os.geteuid() != 0:
            pytest.skip("only a superuser can make a device node (or replace /dev/null)")
        bad = str(tmp_path / "null")
        os.mknod(bad, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    error = _at_once(calls[role], paths["fifo"])
    assert isinstance(error, BatchFileError), repr(error)
    assert error.code == "CONFIG_INVALID"
    assert backend.prompts == []
    assert not list(tmp_path.glob(".batch*"))


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=30))
def test_any_string_as_the_input_path_is_a_batch_file_error(name: str) -> None:
    """Any string naming no input file is a BatchFileError, whatever it holds."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "d", name)
        with pytest.raises(BatchFileError):
            run_batch(path, os.path.join(tmp, "out.jsonl"), client=client_for(EchoBackend()))


# --------------------------------------------------------------------------- batch make


def test_a_csv_field_over_128_kib_is_read_and_csv_is_left_as_it_was(tmp_path: Path) -> None:
    """A long document in a CSV cell is one prompt (the csv module stops at 128 KiB by
    default); the process-wide ``csv.field_size_limit`` is the same afterwards."""
    document = "word " * 60_000  # 300 KB
    table = tmp_path / "docs.csv"
    with table.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["custom_id", "prompt"], ["doc-1", document], ["doc-2", "hi"]])
    before = csv.field_size_limit()
    assert make_input(str(table), str(tmp_path / "in.jsonl")) == 2
    assert csv.field_size_limit() == before
    items = parse_input((tmp_path / "in.jsonl").read_bytes())
    assert [i.custom_id for i in items] == ["doc-1", "doc-2"]
    assert items[0].body["messages"][-1]["content"] == document


@pytest.mark.parametrize("suffix", [".txt", ".csv"])
def test_a_prompt_batch_run_would_refuse_is_refused_by_make(tmp_path: Path, suffix: str) -> None:
    """A prompt whose JSONL line would be over the line limit is refused, naming its row;
    no input file (and no temporary file) is left."""
    source = tmp_path / f"prompts{suffix}"
    big = "z" * (MAX_LINE - 50)
    head = "prompt\n" if suffix == ".csv" else ""
    source.write_text(f"{head}short\n{big}\n", encoding="utf-8")
    with pytest.raises(BatchFileError, match="prompt-3" if suffix == ".csv" else "prompt-2"):
        make_input(str(source), str(tmp_path / "in.jsonl"))
    assert sorted(p.name for p in tmp_path.iterdir()) == [source.name]


def test_a_prompts_line_over_the_limit_is_refused_by_number(tmp_path: Path) -> None:
    """The prompts file is read as a stream of bounded lines too."""
    source = tmp_path / "prompts.txt"
    source.write_bytes(b"ok\n" + b"z" * (MAX_LINE + 1) + b"\n")
    with pytest.raises(BatchFileError, match="line 2"):
        make_input(str(source), str(tmp_path / "in.jsonl"))
