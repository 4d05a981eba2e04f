"""Seconds and dollars per compaction in the cadence section, read from a real call cache."""

from __future__ import annotations

import pandas as pd

from evalkit.models import ChatRequest, ChatResponse
from evalkit.models.cache import CallCache
from evalkit.report.sections.cadence import summarizer_costs


def _call(cache: CallCache, key: str, latency: float, cost: float | None) -> None:
    req = ChatRequest(model="m", messages=({"role": "user", "content": key},), purpose="summarize")
    cache.put(key, req, ChatResponse("summary", "openai", "m", latency_s=latency, cost_usd=cost))


def test_seconds_and_dollars_per_compaction_from_the_call_cache(tmp_path):
    path = tmp_path / "model-calls.sqlite"
    cache = CallCache(path)
    _call(cache, "k1", 2.0, 0.01)
    _call(cache, "k2", 4.0, 0.03)
    _call(cache, "k3", 1.0, None)  # answered, but the model has no price
    events = pd.DataFrame(
        {
            "arm": ["baseline", "baseline", "short", "masking", "lost"],
            "request_key": ["k1", "k2", "k3", None, "gone"],
        }
    )
    got = summarizer_costs(path, events, prices=True)
    assert got["baseline"] == ("3.00", "$0.0200")
    assert got["short"] == ("1.00", "n/a (no prices)")  # never $0
    assert got["masking"] == ("– (no call)", "– (no call)")  # masking calls no summarizer
    assert got["lost"] == ("n/a (not recorded)", "n/a (not recorded)")
    # without a price table no dollars are shown, whatever the cache holds
    assert summarizer_costs(path, events, prices=False)["baseline"] == ("3.00", "n/a (no prices)")
    # an offline run has no call cache
    assert summarizer_costs(tmp_path / "none.sqlite", events, prices=False)["baseline"] == (
        "n/a (not recorded)",
        "n/a (no prices)",
    )
