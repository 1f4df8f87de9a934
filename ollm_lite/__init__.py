"""ollm_lite: a small, synchronous client for local and hosted LLM servers."""

import logging

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())
