"""The figures of a batch run."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BatchSummary"]


@dataclass(frozen=True, slots=True)
class BatchSummary:
    """How a batch run went (also what a progress callback receives after each line)."""

    total: int
    """Requests in the input file."""
    done: int
    """Lines answered successfully in this run."""
    failed: int
    """Lines written with an error in this run."""
    skipped: int
    """Lines already in the output when the run started (failed ones included, unless
    ``retry_failed`` removed them first)."""
    seconds: float
    """Wall time of this run so far."""
    failed_in_output: int = 0
    """Lines of the whole output that hold an error: those kept from earlier runs plus this
    run's ``failed`` so far. Nonzero after a run means the output is not all answers (the CLI
    exits 1); ``retry_failed`` runs them again."""

    @property
    def remaining(self) -> int:
        """Lines neither in the output before nor written by this run (cancelled or left)."""
        return self.total - self.done - self.failed - self.skipped
