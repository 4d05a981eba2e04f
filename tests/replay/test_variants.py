"""Issue 39 trap 9 and item 7: prompt variants defined by settings alone (no plugin), each with its
own replay geometry; `evalkit init` chooses the trigger from the sessions' sizes."""

from __future__ import annotations

import json

import pytest

from evalkit.replay.trigger_choice import choose_trigger
from tests.support.cli import run_cli
from tests.support.runs import tiny_corpus, write_experiment

VARIANT = """
[replay.variants.terse]
instructions_add = ["Target about 100 words."]
guidance = "Keep every command verbatim."
template = ["## Goal", "## Next Step"]
carry = "all-users"
trigger = "messages"
max_messages = 30

[replay.variants.terse-tail]
from = "terse"
keep_messages = 5
"""


def _events(run, arm):
    return [json.loads(ln) for ln in (run / "events" / f"{arm}.jsonl").read_text().splitlines() if ln]


def test_trap9_a_prompt_variant_needs_no_code(tmp_path):
    """Trap 9: a new summary prompt needed an entry-point plugin; keep_recent and the trigger could
    not vary per arm."""
    corpus = tiny_corpus(tmp_path / "corpus", n=1)
    exp = write_experiment(
        tmp_path / "exp.toml",
        corpus,
        replay={
            "arms": ["baseline", "terse", "terse-tail"],
            "window": 200_000,
            "reserve": 16_384,
            "keep_recent": 20_000,
        },
    )
    exp.write_text(exp.read_text() + VARIANT)
    run = tmp_path / "run"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run))
    assert done.returncode == 0, done.stderr
    assert _events(run, "baseline") == []  # the [replay] token trigger never fires on this session
    terse, tail = _events(run, "terse"), _events(run, "terse-tail")
    assert terse and tail and all(e["trigger"] == "messages" for e in terse + tail)
    system = terse[0]["request"]["messages"][0]["content"]
    assert "Target about 100 words." in system and "Keep every command verbatim." in system
    assert "## Next Step" in system and "## Key Decisions" not in system
    assert len(tail) < len(terse)  # keeping 5 messages instead of 15 leaves more room: fewer compactions
    assert "no compaction events for arm(s) baseline" in done.stderr


@pytest.mark.parametrize(
    "table, named",
    [
        ('[replay.variants.x]\nfrom = "nope"\n', "nope"),
        ('[replay.variants.x]\ncarry = "everything"\n', "replay.variants.x.carry"),
        ("[replay.variants.x]\nkeep_recnt = 5\n", "replay.variants.x.keep_recnt"),
        ('[replay.variants.baseline]\ntrigger = "messages"\n', "replay.variants.baseline"),
    ],
)
def test_a_bad_variant_fails_before_any_work(tmp_path, table, named):
    corpus = tiny_corpus(tmp_path / "corpus", n=1)
    exp = write_experiment(tmp_path / "exp.toml", corpus, replay={"arms": ["baseline", "x"]})
    exp.write_text(exp.read_text() + table)
    run = tmp_path / "run"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run))
    assert done.returncode == 2, done.stderr
    assert named in done.stderr and not (run / "corpus").exists()


def test_the_trigger_is_chosen_from_the_sessions_sizes():
    """Trap 4: real sessions of 4-225 messages never reach the default window; init says so."""
    short = [{"messages": m, "bytes": 4 * 5_000 * m} for m in (4, 20, 30, 225)]
    c = choose_trigger(short, 183_616)
    assert (c.trigger, c.max_messages) == ("messages", 12) and 'trigger = "messages"' in c.toml()
    long = [{"messages": 3000, "bytes": 4 * 400_000}] * 3
    assert choose_trigger(long, 183_616).trigger == "tokens"
