"""The noise floor: the A/A arm against the baseline on every metric in the table, reported with
its estimate and t interval (no sign-flip draws), and the note that says it in words."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalkit.decide import stats
from evalkit.decide.rules import Rules


class NoiseCells:
    """The A/A arm against the baseline, one column per metric in the table, kept as the present
    (session, column) cells only (:func:`evalkit.decide.stats.point_estimates`).

    The noise floor reports each column's estimate and t interval and takes no sign-flip draws, so
    it needs no dense (sessions × metrics) matrix: with one metric per question, that matrix grows
    with the square of the corpus. Frames come in session order, each session in one frame."""

    def __init__(self, columns: list[tuple[str, str]], rules: Rules) -> None:
        self.columns, self.rules = columns, rules
        self._cells: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def add(self, df: pd.DataFrame) -> None:
        """Take in one frame's cells."""
        if not self.columns:
            return
        part = stats.paired_differences(df, self.columns, self.rules.baseline)
        X, Y = stats.estimand_matrices(part.diff_sum, part.count, self.rules.estimand)
        present = Y > 0
        _g, col = np.nonzero(present)  # row-major: each column's cells in session order
        self._cells.append((col, X[present], Y[present]))

    def point(self) -> stats.Point:
        """Estimate, SE, t interval and sessions of every column."""
        col, x, y = (
            np.concatenate([c[i] for c in self._cells]) if self._cells else np.zeros(0) for i in range(3)
        )
        return stats.point_estimates(col.astype(np.int64), x, y, len(self.columns), self.rules.alpha)

    def floor(self) -> dict[str, dict]:
        """``decision.json``'s ``noise_floor``: per metric with A/A sessions, the estimate, its t
        interval, the sessions, and whether every session's difference is exactly zero."""
        point = self.point()
        return {
            m: {
                "aa_estimate": float(point.estimate[k]),
                "ci": list(point.ci[k]),
                "n_sessions": int(point.n_sessions[k]),
                "exactly_zero": bool(point.differing[k] == 0),
            }
            for k, (_aa, m) in enumerate(self.columns)
            if point.n_sessions[k] > 0
        }


def noise_note(noise: dict, aa: str) -> str:
    if not noise:
        return f"no A/A arm ({aa}) in this run: the noise floor was not measured"
    if all(v["exactly_zero"] for v in noise.values()):
        return (
            f"A/A arm ({aa}) equals the baseline exactly on every metric: the backend is deterministic, "
            "so the noise floor is exactly zero"
        )
    moved = sorted(m for m, v in noise.items() if not v["exactly_zero"])
    return (
        f"A/A arm ({aa}) differs from the baseline on {', '.join(moved)}: replicate noise, see each interval"
    )
