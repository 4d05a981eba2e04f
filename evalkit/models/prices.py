"""Dollars from the experiment's price table: ``[model.prices.<model>]`` in USD per million tokens.

Keys per model: ``input``, ``output``, and optionally ``cached_input`` (prompt tokens the provider
served from its prefix cache, ``usage.prompt_tokens_details.cached_tokens``; default: ``input``)
and ``batch_input`` / ``batch_output`` (provider batch jobs; default: the direct prices). There
are no built-in prices: a model without an entry costs ``None`` ("unpriced"), never zero.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cached_input: float
    batch_input: float
    batch_output: float

    @classmethod
    def from_table(cls, model: str, row: dict) -> Price:
        try:
            inp, out = float(row["input"]), float(row["output"])
        except KeyError as e:
            raise ValueError(f"[model.prices.{model}]: missing {e.args[0]!r} (USD per 1M tokens)") from None
        return cls(
            inp,
            out,
            float(row.get("cached_input", inp)),
            float(row.get("batch_input", inp)),
            float(row.get("batch_output", out)),
        )

    def cost(self, prompt: float, completion: float, cached: float = 0.0, batch: bool = False) -> float:
        """USD for ``prompt`` input tokens of which ``cached`` hit the provider's prefix cache."""
        cached = min(cached, prompt)
        rate_in = self.batch_input if batch else self.input
        rate_out = self.batch_output if batch else self.output
        # A batch discount applies to cached tokens too, never raising them above the batch rate.
        rate_cached = min(self.cached_input, rate_in)
        return ((prompt - cached) * rate_in + cached * rate_cached + completion * rate_out) / 1e6


def price_of(prices: dict, model: str) -> Price | None:
    """The model's prices, or None when the table has no entry for it."""
    row = (prices or {}).get(model)
    return Price.from_table(model, row) if row else None


def cost_usd(prices: dict, model: str, usage: dict, batch: bool = False) -> float | None:
    """Cost of one answered call from its usage (``prompt_tokens``, ``completion_tokens``,
    ``cached_tokens``); None if the model is unpriced."""
    p = price_of(prices, model)
    if p is None:
        return None
    return p.cost(
        usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0), usage.get("cached_tokens", 0), batch
    )
