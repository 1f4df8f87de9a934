"""A steadier per-event stream ratio: many alternating rounds, the median of each round's ratio.

``python3 -m benchmarks.ab_streams [sse|ndjson] [--rounds 25] [--chunks 20000]`` streams one
workload (one event per HTTP chunk) from the benchmark server, alternating ollm_lite and the
fastest naive loop (``str.split``) round by round, and prints each one's client CPU per event
and the quartiles of the per-round ratio. One full ``python -m benchmarks`` run moves by a few
per cent on a shared machine; a ratio taken within each round cancels most of that drift.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ._common import interleave
from ._server import ServerProcess
from .bench_streams import Clients, contenders

CONTENDERS = ("ollm_lite", "naive str.split")


def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    """The lower quartile, the median and the upper quartile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 4], ordered[n // 2], ordered[(3 * n) // 4]


def run(fmt: str, rounds: int, chunks: int) -> dict[str, float]:
    """Client CPU µs per event of each contender (median) and the per-round ratio quartiles."""
    with ServerProcess() as server:
        clients = Clients(server.url)
        try:
            every = contenders(clients, fmt, f"text-event-{chunks}")
            chosen = {name: every[name] for name in CONTENDERS}
            cpu: dict[str, list[float]] = {}
            interleave(chosen, rounds, cpu=cpu)
        finally:
            clients.close()
    ours, naive = cpu[CONTENDERS[0]], cpu[CONTENDERS[1]]
    low, mid, high = quartiles([a / b for a, b in zip(ours, naive, strict=True)])
    return {
        "ollm_lite_us": quartiles(ours)[1] / chunks * 1e6,
        "naive_us": quartiles(naive)[1] / chunks * 1e6,
        "ratio_q1": low,
        "ratio_median": mid,
        "ratio_q3": high,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Print the figures of one A/B run."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ab_streams", description=__doc__)
    parser.add_argument("format", nargs="?", choices=("sse", "ndjson"), default="sse")
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--chunks", type=int, default=20_000)
    args = parser.parse_args(argv)
    figures = run(args.format, args.rounds, args.chunks)
    print(
        f"{args.format} per-event, {args.rounds} rounds of {args.chunks} events, client CPU: "
        f"ollm_lite {figures['ollm_lite_us']:.2f} µs, naive str.split "
        f"{figures['naive_us']:.2f} µs; ratio median {figures['ratio_median']:.3f} "
        f"(quartiles {figures['ratio_q1']:.3f}, {figures['ratio_q3']:.3f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
