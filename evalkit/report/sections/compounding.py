"""Section 4, compounding and size: how summaries grow over chained compactions."""

from __future__ import annotations

from pathlib import Path

from evalkit.decide.stage import REFERENCE_ARMS
from evalkit.report.data import ReportData
from evalkit.report.figures import compounding_plot
from evalkit.report.markdown import (
    code,
    merge_same_rows,
    rel_link,
    table,
)


def section_compounding(data: ReportData, out: Path) -> list[str]:
    ev = data.events
    if ev.empty:
        return ["No compaction events in this run folder (`events/*.jsonl`), so there is nothing to plot."]
    have = set(ev["arm"].unique())
    # The exam reference arms never compact (the ceiling keeps everything, the floor nothing):
    # they belong to the scorecard, not to a table of how compaction grows.
    arms = [a for a in data.arms if a in have and a not in REFERENCE_ARMS]
    replay = data.config.get("replay", {})
    window, reserve = replay.get("window"), replay.get("reserve")
    trigger = (
        100 * (window - reserve) / window
        if isinstance(window, int) and isinstance(reserve, int) and window
        else None
    )
    # only the columns the figure reads: the events go to a worker process
    cols = ["arm", "session", "round", "summary_tokens", "tokens_after", "window", "over_limit"]
    fig = data.figures.draw(compounding_plot, out / "fig-compounding.png", ev[cols], arms, trigger)
    lines = [
        "A summary that re-embeds the previous one grows with every round (the seed-004 failure) until the "
        "context no longer fits: a healthy arm's fill stays flat, well below the window. A session is *dead* "
        "when a compaction leaves it above the window.",
        "",
        f"![Context after compaction and the summary's share of it by round, one panel per arm]({rel_link(fig, out)})",
        "",
    ]
    rows = []
    for arm in arms:
        sub = ev[ev["arm"] == arm]
        by_round = sub.groupby("round")["summary_chars"].median()
        first, last_round = by_round.iloc[0], int(by_round.index.max())
        last = by_round.iloc[-1]
        share = 100 * sub["tokens_after"] / sub["window"].where(sub["window"] > 0)
        dead = sub.loc[sub["over_limit"], "session"].nunique()
        rows.append(
            [
                code(arm),
                str(sub["session"].nunique()),
                str(len(sub)),
                f"{first / 1e3:.1f}k → {last / 1e3:.1f}k (round {last_round}: "
                f"{sub.loc[sub['round'] == last_round, 'session'].nunique()})",
                f"×{last / first:.1f}" if first > 0 else "n/a",
                f"{share.median():.0f}% (max {share.max():.0f}%)",
                str(int(sub["summary_failed"].sum())),
                f"**{dead}**" if dead else "0",
            ]
        )
    lines += [
        table(
            [
                "arm",
                "sessions",
                "compactions",
                "median summary size, round 1 → last (sessions there)",
                "growth",
                "context after / window (median)",
                "failed summaries",
                "dead sessions",
            ],
            merge_same_rows(rows),
        ),
    ]
    return lines
