"""``python -m benchmarks``: run every benchmark and print the table."""

import sys

from .run_all import main

sys.exit(main())
