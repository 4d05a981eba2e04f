"""Numbers and intervals in the words verdict reasons use."""

from __future__ import annotations

import math


def num(x: float | None, signed: bool = False) -> str:
    """A number as a reader wants it: 3 significant digits, no exponent for everyday magnitudes."""
    if x is None or not math.isfinite(x):
        return "n/a"
    if x == 0:
        return "0"
    s = f"{x:+,.0f}" if abs(x) >= 1000 else f"{x:+.3g}" if abs(x) >= 1e-3 else f"{x:+.2e}"
    return s if signed else s.lstrip("+")


def pval(p: float, name: str = "p") -> str:
    return f"{name}<0.001" if p < 0.001 else f"{name}={p:.3f}"


def interval(ci) -> str:
    """[lo, hi]; a bound the session bootstrap cannot set (too few sessions differ) is ∞."""
    return f"[{_bound(ci[0])}, {_bound(ci[1])}]"


def _bound(x: float | None) -> str:
    if x is not None and math.isinf(x):
        return "∞" if x > 0 else "-∞"
    return num(x)
