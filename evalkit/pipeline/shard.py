"""Shards: the unit the per-session stages (corpus, replay, score, continuation) run over.

Shard ``k/n`` holds the sessions at corpus positions ``p`` with ``p % n == k - 1`` (by order, not
by hash: a merge restores corpus order by dealing the shards' sessions back round-robin, with no
index to carry). A shard's run folder ends with ``shard.json`` — written last, so its presence
means every per-session stage of the shard finished — naming the config hash, ``k``, ``n`` and
the sessions it holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from evalkit.contracts.records import ShardMarker
from evalkit.contracts.runs import read_record, write_record

MARKER = ShardMarker.FILE


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __post_init__(self):
        if not (self.count >= 1 and 1 <= self.index <= self.count):
            raise ValueError(f"shard {self.index}/{self.count}: need 1 <= k <= n")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"2/8"`` → ``Shard(2, 8)``."""
        m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
        if not m:
            raise ValueError(f"--shard {text!r}: expected K/N, e.g. 2/8")
        return cls(int(m.group(1)), int(m.group(2)))

    @property
    def name(self) -> str:
        return f"shard-{self.index}-of-{self.count}"

    def holds(self, position: int) -> bool:
        """Whether the session at corpus ``position`` (0-based) belongs to this shard."""
        return position % self.count == self.index - 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def all_shards(count: int) -> list[Shard]:
    return [Shard(k, count) for k in range(1, count + 1)]


def write_marker(run_dir: Path, shard: Shard, config_hash: str, sessions: list[str], root: str = "") -> None:
    """The shard's completion marker (written last; see the module docstring)."""
    body = {
        "shard": shard.index,
        "shards": shard.count,
        "config_hash": config_hash,
        "root": root,
        "sessions": sessions,
    }
    write_record(run_dir, ShardMarker, body)


def read_marker(run_dir: Path) -> ShardMarker | None:
    """The shard's completion marker, None when the shard has not finished."""
    return read_record(run_dir, ShardMarker)


def interleave(per_shard: list[list], count: int) -> list:
    """Deal items back into corpus order: shard k's j-th item sits at position ``j * n + k - 1``."""
    out: list = []
    j = 0
    while True:
        row = [items[j] for items in per_shard if j < len(items)]
        if not row:
            return out
        out.extend(row)
        j += 1
