"""Peak memory streaming a large answer (50 MB in a full run).

Each case runs in a fresh interpreter: it imports its client, streams one small answer to
warm up, resets and notes its peak RSS (``VmHWM`` in ``/proc/self/status``; Linux only), streams
the large answer (``n`` chunks of 8 KiB of
text) and reports how much the peak grew, as a multiple of the answer's size. Two ways to
consume the stream:

* ``discard``: look at each piece and drop it: what the library itself holds;
* ``collect``: keep the pieces in a list and ``"".join`` them at the end, as a script that
  wants the whole answer does (the list and the joined text exist together for a moment,
  so about 2x the answer is the floor for this consumer).

The target (≤ 2.5x the answer) is checked on ``collect`` for both ollm_lite providers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ._common import ROOT, Report, Settings, peer
from ._server import ServerProcess

SECTION = "memory"
PIECE = 8192

_CHILD = r"""
import gc, json, sys
url, client, fmt, mode, n, size = sys.argv[1:7]
n, size = int(n), int(size)

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024  # kB
    raise SystemExit("no " + field)

def peak():
    # VmHWM, not ru_maxrss: ru_maxrss survives exec and starts at the parent's size.
    return status("VmHWM")

def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
    except OSError:
        pass
    return peak()

if client == "ollm_lite":
    from ollm_lite.types import Message, ProviderRequest, TextEvent
    if fmt == "sse":
        from ollm_lite.providers.openai_compat import OpenAICompatibleProvider as P
    else:
        from ollm_lite.providers.ollama import LocalProvider as P
    provider = P(base_url=url, retries=0)
    def pieces(model):
        req = ProviderRequest(model=model, messages=[Message.user("hi")])
        for ev in provider.chat_stream(req):
            if type(ev) is TextEvent:
                yield ev.value
elif client == "openai":
    import openai
    c = openai.OpenAI(base_url=url + "/v1", api_key="bench", max_retries=0)
    def pieces(model):
        for ch in c.chat.completions.create(model=model, messages=[{"role": "user",
                                            "content": "hi"}], stream=True):
            if ch.choices and ch.choices[0].delta.content:
                yield ch.choices[0].delta.content
else:
    import ollama
    c = ollama.Client(host=url)
    def pieces(model):
        for ch in c.chat(model=model, messages=[{"role": "user", "content": "hi"}], stream=True):
            if ch.message.content:
                yield ch.message.content

def consume(model):
    if mode == "discard":
        total = 0
        for p in pieces(model):
            total += len(p)
        return total
    parts = list(pieces(model))
    return len("".join(parts))

consume(f"big-event-64-{size}")
gc.collect()
base = reset_peak()
got = consume(f"big-event-{n}-{size}")
print(json.dumps({"base": base, "peak": peak(), "chars": got}))
"""


def measure(url: str, client: str, fmt: str, mode: str, n: int, size: int) -> dict[str, int]:
    """Run one case in a fresh interpreter; its peak RSS before and after the big answer."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, url, client, fmt, mode, str(n), str(size)],
        cwd=str(ROOT),
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    result: dict[str, int] = json.loads(out.strip().splitlines()[-1])
    return result


def run(settings: Settings, server: ServerProcess | None = None) -> Report:
    """Peak RSS growth per case; the ≤ 2.5x target for ollm_lite."""
    report = Report(SECTION)
    own = server is None
    srv = server or ServerProcess()
    size_bytes = settings.answer_mb * 1_000_000
    n = max(1, size_bytes // PIECE)
    answer = n * PIECE
    cases = [("ollm_lite", "sse"), ("ollm_lite", "ndjson")]
    if peer("openai") is not None:
        cases.append(("openai", "sse"))
    if peer("ollama") is not None:
        cases.append(("ollama", "ndjson"))
    try:
        for client, fmt in cases:
            for mode in ("discard", "collect"):
                if client != "ollm_lite" and mode == "discard":
                    continue
                r = measure(srv.url, client, fmt, mode, n, PIECE)
                if r["chars"] != answer:
                    raise RuntimeError(f"{client} {fmt} received {r['chars']} of {answer} chars")
                growth = max(0, r["peak"] - r["base"])
                ratio = growth / answer
                label = f"{client} {fmt.upper()}, {mode}"
                report.add(
                    f"{label}: peak RSS growth",
                    growth / 1e6,
                    "MB",
                    f"{ratio:.2f}x the {answer / 1e6:.0f} MB answer",
                )
                if client == "ollm_lite" and mode == "collect":
                    report.target(
                        f"memory, {label} (peak growth ÷ answer size)",
                        ratio,
                        2.5,
                        "x",
                        f"{growth / 1e6:.0f} MB for {answer / 1e6:.0f} MB",
                    )
    finally:
        if own:
            srv.close()
    return report
