"""Run every benchmark and print one table: ``python -m benchmarks`` (from the repository root).

Options:
    --quick         a short run (small streams, fewer samples; about a minute)
    --json          print the results as JSON instead of a table
    --markdown      print Markdown tables (what benchmarks/RESULTS.md holds)
    --only A,B      run only these sections: streams, import, chat, cancel, memory, parsers,
                    batch, call_log, gate
    --render FILE   print the table (or with --markdown, Markdown) of a saved --json run

Peers (openai-python, ollama-python) come from the ``bench`` extra:
``pip install -e '.[bench]'``; without them their rows are left out. Exit status 0 when every
target was met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict

from . import (
    bench_batch,
    bench_call_log,
    bench_cancel,
    bench_chat,
    bench_gate,
    bench_import,
    bench_memory,
    bench_parsers,
    bench_streams,
)
from ._common import Report, Settings, machine
from ._server import ServerProcess

SECTIONS: dict[str, Callable[[Settings, ServerProcess | None], Report]] = {
    "streams": bench_streams.run,
    "import": bench_import.run,
    "chat": bench_chat.run,
    "cancel": bench_cancel.run,
    "memory": bench_memory.run,
    "parsers": bench_parsers.run,
    "batch": bench_batch.run,
    "call_log": bench_call_log.run,
    "gate": bench_gate.run,
}


def run_sections(
    names: list[str], settings: Settings, progress: Callable[[str], None] | None = None
) -> list[Report]:
    """Run the named sections against one shared loopback server."""
    reports = []
    with ServerProcess() as server:
        for name in names:
            if progress is not None:
                progress(name)
            started = time.perf_counter()
            report = SECTIONS[name](settings, server)
            report.notes.append(f"section took {time.perf_counter() - started:.1f} s")
            reports.append(report)
    return reports


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if abs(value) >= 0.1 else f"{value:.3f}"


def _target_rows(reports: list[Report]) -> list[tuple[str, str, str, str]]:
    rows = []
    for report in reports:
        for t in report.targets:
            sign = "≥" if t.at_least else "≤"
            rows.append(
                (
                    t.name,
                    f"{_fmt(t.measured)} {t.unit}",
                    f"{sign} {_fmt(t.limit)} {t.unit}",
                    ("met" if t.met else "MISSED") + (f" ({t.detail})" if t.detail else ""),
                )
            )
    return rows


def format_table(reports: list[Report], info: dict[str, object]) -> str:
    """Plain-text table of every figure, then the targets."""
    lines = ["machine: " + ", ".join(f"{k} {v}" for k, v in info.items())]
    width = max((len(r.name) for rep in reports for r in rep.results), default=20)
    for report in reports:
        lines.append("")
        lines.append(f"== {report.section}")
        for r in report.results:
            lines.append(f"  {r.name:<{width}}  {_fmt(r.value):>9} {r.unit:<12} {r.note}")
        for note in report.notes:
            lines.append(f"  note: {note}")
    rows = _target_rows(reports)
    if rows:
        lines.append("")
        lines.append("== targets")
        name_w = max(len(r[0]) for r in rows)
        for name, measured, limit, verdict in rows:
            lines.append(f"  {name:<{name_w}}  {measured:>12}  {limit:>10}  {verdict}")
    return "\n".join(lines)


def format_markdown(reports: list[Report], info: dict[str, object]) -> str:
    """Markdown tables (the body of RESULTS.md)."""
    out = ["| machine | |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in info.items()]
    rows = _target_rows(reports)
    if rows:
        out += [
            "",
            "### Targets",
            "",
            "| target | measured | limit | verdict |",
            "|---|---:|---:|---|",
        ]
        out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    for report in reports:
        out += [
            "",
            f"### {report.section}",
            "",
            "| figure | value | unit | note |",
            "|---|---:|---|---|",
        ]
        out += [f"| {r.name} | {_fmt(r.value)} | {r.unit} | {r.note} |" for r in report.results]
        out += [f"\n_{note}_" for note in report.notes]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="short run with small sizes")
    parser.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)  # tiny sizes
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument(
        "--render", metavar="JSON", help="print the table (or --markdown) of a saved --json run"
    )
    parser.add_argument(
        "--only", default="", help="comma-separated sections: " + ", ".join(SECTIONS)
    )
    args = parser.parse_args(argv)
    if args.render:
        with open(args.render, encoding="utf-8") as f:
            saved = json.load(f)
        reports, info = [Report.from_dict(d) for d in saved["sections"]], saved["machine"]
        print(format_markdown(reports, info) if args.markdown else format_table(reports, info))
        return 0 if all(t.met for r in reports for t in r.targets) else 1
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(SECTIONS)
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    settings = Settings.tiny() if args.smoke else Settings.quick() if args.quick else Settings()
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    info = {**machine(), "mode": mode}

    def progress(name: str) -> None:
        print(f"running {name} ...", file=sys.stderr, flush=True)

    reports = run_sections(names, settings, progress)
    if args.json:
        payload = {
            "machine": info,
            "settings": asdict(settings),
            "sections": [r.to_dict() for r in reports],
        }
        print(json.dumps(payload, indent=2, ensure_ascii=False))
    elif args.markdown:
        print(format_markdown(reports, info))
    else:
        print(format_table(reports, info))
    return 0 if all(t.met for r in reports for t in r.targets) else 1


if __name__ == "__main__":
    sys.exit(main())
