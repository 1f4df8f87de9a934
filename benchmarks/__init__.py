"""Benchmarks for ollm_lite beside plain ``requests``, openai-python and ollama-python.

Not part of the test suite. Run everything with ``python -m benchmarks`` from the repository
root (``--quick`` for a short run, ``--json`` for machine-readable output); see
``benchmarks/RESULTS.md`` for the latest figures.
"""
