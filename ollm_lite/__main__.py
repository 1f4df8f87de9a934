"""``python -m ollm_lite``: the ``ollm-lite`` command line (see :mod:`ollm_lite.cli`)."""

from __future__ import annotations

if __name__ == "__main__":
    from .cli import main

    raise SystemExit(main())
