"""Shared pieces of the benchmarks: result records, targets, timing helpers, machine facts.

Every ``bench_*.py`` module exposes ``run(settings, server) -> Report``; ``run_all`` collects
the reports, prints one table (or JSON, or Markdown) and the list of targets met or missed.
"""

from __future__ import annotations

import gc
import importlib.metadata
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

__all__ = [
    "ROOT",
    "Report",
    "Result",
    "Settings",
    "Target",
    "interleave",
    "machine",
    "median",
    "percentile",
    "peer",
]


@dataclass(frozen=True)
class Settings:
    """How big and how often.

    Attributes:
        chunks: Chunks per throughput stream (20 000 in a full run).
        runs: Timed runs per contender, after one warm-up (median reported).
        fragments: Tool-call argument fragments in the long tool-call stream.
        samples: Samples for latency figures (time to first event, cancellation).
        import_runs: Fresh interpreters per module for import time.
        answer_mb: Size of the answer in the memory benchmark.
        import_only: Import-time rows to measure (empty: all of them).
        process_runs: Pairs of whole-process runs for the import target.
    """

    chunks: int = 20_000
    runs: int = 9
    fragments: int = 2_000
    samples: int = 100
    import_runs: int = 7
    answer_mb: int = 50
    import_only: tuple[str, ...] = ()
    process_runs: int = 15

    @classmethod
    def quick(cls) -> Settings:
        """A short run (seconds): the same code paths with small sizes."""
        return cls(
            chunks=2_000,
            runs=5,
            fragments=500,
            samples=20,
            import_runs=3,
            answer_mb=10,
            process_runs=5,
        )

    @classmethod
    def tiny(cls) -> Settings:
        """For the smoke test: every code path, figures meaningless."""
        return cls(
            chunks=50,
            runs=1,
            fragments=20,
            samples=2,
            import_runs=1,
            answer_mb=1,
            process_runs=1,
            import_only=("requests", "ollm_lite"),
        )


@dataclass
class Result:
    """One measured figure."""

    section: str
    name: str
    value: float
    unit: str
    note: str = ""


@dataclass
class Target:
    """A speed goal: ``measured`` at most ``limit`` (at least, when ``at_least``)."""

    name: str
    measured: float
    limit: float
    unit: str
    detail: str = ""
    at_least: bool = False

    @property
    def met(self) -> bool:
        """Whether the figure is on the right side of the limit."""
        if math.isnan(self.measured):
            return False
        return self.measured >= self.limit if self.at_least else self.measured <= self.limit


@dataclass
class Report:
    """What one benchmark section produced."""

    section: str
    results: list[Result] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, name: str, value: float, unit: str, note: str = "") -> Result:
        """Record a figure."""
        result = Result(self.section, name, value, unit, note)
        self.results.append(result)
        return result

    def target(
        self,
        name: str,
        measured: float,
        limit: float,
        unit: str,
        detail: str = "",
        *,
        at_least: bool = False,
    ) -> Target:
        """Record a target check."""
        target = Target(name, measured, limit, unit, detail, at_least)
        self.targets.append(target)
        return target

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        """The inverse of :meth:`to_dict`."""
        fields = ("name", "measured", "limit", "unit", "detail", "at_least")
        return cls(
            data["section"],
            [Result(**r) for r in data["results"]],
            [Target(**{k: t[k] for k in fields}) for t in data["targets"]],
            list(data["notes"]),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "section": self.section,
            "results": [asdict(r) for r in self.results],
            "targets": [{**asdict(t), "met": t.met} for t in self.targets],
            "notes": list(self.notes),
        }


def median(values: Sequence[float]) -> float:
    """Median, NaN for no values."""
    return statistics.median(values) if values else math.nan


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank), NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def interleave(
    contenders: Mapping[str, Callable[[], object]],
    runs: int,
    warmup: int = 1,
    cpu: dict[str, list[float]] | None = None,
) -> dict[str, list[float]]:
    """Seconds per call of each contender: ``warmup`` untimed rounds, then ``runs`` timed
    rounds, each round calling every contender once in turn (so drift hits all alike).

    The garbage collector runs between calls, never inside one. With ``cpu``, the CPU seconds
    this process spent in each call are collected there too (the loopback server is another
    process, so that is the client's own work, which other load on the machine barely moves).
    """
    times: dict[str, list[float]] = {name: [] for name in contenders}
    if cpu is not None:
        cpu.update({name: [] for name in contenders})
    perf = time.perf_counter
    process = time.process_time
    for round_no in range(warmup + runs):
        for name, fn in contenders.items():
            gc.collect()
            c0 = process()
            t0 = perf()
            fn()
            elapsed = perf() - t0
            used = process() - c0
            if round_no >= warmup:
                times[name].append(elapsed)
                if cpu is not None:
                    cpu[name].append(used)
    return times


def peer(module: str) -> Any:
    """Import a peer client (openai, ollama) if it is installed, else ``None``."""
    try:
        return __import__(module)
    except ImportError:
        return None


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """Facts about the machine and the software measured."""
    from ollm_lite import __version__

    return {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "ollm_lite": __version__,
        "requests": _version("requests"),
        "urllib3": _version("urllib3"),
        "openai": _version("openai"),
        "ollama": _version("ollama"),
        "httpx": _version("httpx"),
    }
