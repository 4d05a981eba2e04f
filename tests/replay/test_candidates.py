"""Each candidate's defining behaviour on a constructed session (seeds 000, 002, 003, 004)."""

from __future__ import annotations

import itertools
import json

import pytest

from evalkit.common.plaintext import context_plain_text
from evalkit.common.tokens import message_tokens
from evalkit.contracts.config import ModelConfig, ReplayConfig
from evalkit.contracts.event import Event, resolve_context
from evalkit.models import make_client
from evalkit.replay import ARMS, ReplaySettings, policy_for, replay_session, resolve_request
from evalkit.replay.candidates import BRIDGE, FALLBACK_RATIO, USER_CAP, USERS_CAP
from evalkit.replay.render import TOOL_RESULT_CHARS
from tests.support.replay_sessions import Builder, echo_all, filler_turns, fixed, stacking

SMALL = ReplaySettings(window=6_000, reserve=1_000, keep_recent=800)
MODEL = ModelConfig(backend="extractive", model="extractive-v1")


def run(session, arm, settings=SMALL, client=None) -> list[Event]:
    return replay_session(session, arm, settings, MODEL, client or make_client(MODEL))


def visible(ev: Event, session) -> str:
    return context_plain_text(resolve_context(ev, {m.id: m for m in session.messages}))


def prompt(ev: Event, session) -> str:
    req = resolve_request(ev, session)
    assert req is not None and req.key("extractive") == ev.request_key  # rebuilt exactly
    return req.messages[-1]["content"]


def test_every_seed_candidate_is_registered_with_evidence():
    want = {
        "head-tail", "bridge", "state-sections", "short", "carry-all", "validate",  # seed 000
        "plugin-carry", "retained", "empty-source-stub",  # seeds 002, 003
        "no-stack", "digest-cap", "fallback-trim", "skip-redundant", "masking", "aa", "baseline",
    }  # fmt: skip
    assert want <= set(ARMS.names())
    for e in ARMS:
        assert e.description and e.info.get("evidence")


def test_head_tail_keeps_a_tally_past_char_2000_that_baseline_loses():
    """Seed 000: 66% of long test results had their tally only after character 2,000."""
    b = Builder()
    b.user("Fix the parser.")
    tally = "===== 3 failed, 117 passed in 4.20s ====="
    out = "x" * 2_400 + "\n" + tally + "\n" + ("tests/test_p.py::t PASSED\n" * 80)  # tally at char 2,401
    assert out.index(tally) > TOOL_RESULT_CHARS and len(out) - out.index(tally) > 1_500
    b.tool("Bash", {"command": "pytest"}, out, is_error=True)
    filler_turns(b, 20)
    s = b.session()
    base, ht = run(s, "baseline")[0], run(s, "head-tail")[0]
    assert tally not in prompt(base, s)
    assert tally in prompt(ht, s)
    assert ht.truncated_chars < base.truncated_chars  # head-tail shows more of the output
    assert base.invariants.lost_chars == ht.invariants.lost_chars == 0  # the cut is policy


def _carry_session() -> tuple:
    b = Builder(meta={"carry_files": ["PROJECT.md", "MEMORY.md"]})
    b.user("Work on the service.")
    project = "# PROJECT.md\nService: ledger-svc\nDeploy: make release (never on Fridays)\n"
    memory = "# MEMORY.md\n- ids are ULIDs\n- the staging DB is read-only\n"
    b.tool("Read", {"file_path": "PROJECT.md"}, project)
    b.tool("Read", {"file_path": "docs/MEMORY.md"}, memory)
    filler_turns(b, 70)
    return b.session(), project, memory


def test_plugin_carry_is_in_context_exactly_once_and_never_resummarized():
    """Seed 002: carried texts are stored verbatim on the compaction message, seen before the
    summary, hidden from every later summarizer, and carried exactly once."""
    s, project, memory = _carry_session()
    events = run(s, "plugin-carry")
    assert len(events) >= 3
    for k, ev in enumerate(events[:3]):
        text = visible(ev, s)
        assert text.count(project) == 1 and text.count(memory) == 1, k
        assert text.index(project) < text.index("[Earlier conversation compacted")
        assert ev.carried[:2] == [project, memory]
        if k:  # a later summarizer never sees them
            assert project not in prompt(ev, s) and memory not in prompt(ev, s)
    base = run(s, "baseline")
    assert all(project not in visible(ev, s) for ev in base)  # what the hook rescues


def test_retained_shows_the_kept_tail_outside_the_conversation():
    b = Builder()
    b.user("Start.")
    filler_turns(b, 20, tag="early")
    s = b.session()
    ev_r, ev_b = run(s, "retained")[0], run(s, "baseline")[0]
    kept = [e["ref"] for e in ev_r.new_context if "ref" in e]
    last = {m.id: m for m in s.messages}[kept[-1]]
    marker = last.tool_results()[0].output[:40] if last.tool_results() else last.text
    p = prompt(ev_r, s)
    conversation, retained = p.split("<retained>\n", 1)
    assert marker not in conversation and marker in retained
    assert "<retained>" not in prompt(ev_b, s)


def _paste_session() -> tuple:
    """Seed 003's trigger: a ~50 KiB paste, a reply, a ~66 KiB paste, then short turns."""
    b = Builder()
    b.user("Investigate the CI failures.")
    b.say("Please paste the logs.")
    b.user("first log:\n" + "A" * (50 * 1024))
    b.say("Got it.")
    big = b.user("second log:\n" + "B" * (65 * 1024) + "\nEND-OF-SECOND-LOG")
    for k in range(40):
        b.say(f"reply {k}")
        b.user(f"short turn {k}")
    b.say("done")
    return b.session(), big


def test_empty_source_stub_loses_nothing_where_baseline_loses_the_oversized_message():
    """Seed 003: a never-fit message was stubbed into the source's leftover bytes and deleted.

    Here the baseline's first+latest-three user carry keeps the stubbed text in view for a
    while; its unseen part is lost when it drops out of the carry. The fix leaves the message
    in the session and stubs it later against an empty source (losing only what exceeds 64 KiB).
    """
    s, big = _paste_session()
    settings = ReplaySettings(trigger="messages", max_messages=16, keep_messages=4, summary_source_chars=65_536)
    base, fix = run(s, "baseline", settings), run(s, "empty-source-stub", settings)
    assert big.id in base[0].removed_ids and "[truncated]" in prompt(base[0], s)
    assert base[0].source_chars == settings.summary_source_chars
    # Where the baseline stubs, the fix loses nothing and keeps the message in view.
    assert fix[0].invariants.lost_chars == 0 and {"ref": big.id} in fix[0].new_context
    assert "END-OF-SECOND-LOG" in visible(fix[0], s)
    assert "[truncated]" not in prompt(fix[0], s)
    lost_base = sum(e.invariants.lost_chars for e in base)
    lost_fix = sum(e.invariants.lost_chars for e in fix)
    over = len(big.text) - settings.summary_source_chars
    assert lost_base > 45_000  # all but the ~14 KB the stub kept
    assert lost_fix <= over + 64  # only the part no 64 KiB source can hold, when it is finally stubbed


def _long_session(rounds_turns: int = 120) -> object:
    b = Builder()
    b.user("Long task.")
    filler_turns(b, rounds_turns)
    return b.session()


def test_no_stack_keeps_summary_flat_while_echo_makes_baseline_grow():
    """Seed 004: summaries embedded the previous ones, 3 KB -> 1.1 MB over 7 compactions."""
    s = _long_session(150)
    big = ReplaySettings(window=8_000, reserve=1_000, keep_recent=800)
    base = [e.summary_tokens for e in run(s, "baseline", big, stacking)[:6]]
    flat = [e.summary_tokens for e in run(s, "no-stack", big, stacking)[:6]]
    assert len(base) == len(flat) == 6
    assert all(b2 > b1 for b1, b2 in itertools.pairwise(base))  # compounding
    assert base[-1] > 3 * base[0]
    assert max(flat[1:]) < 1.3 * min(flat[1:])  # a marker, not the previous summary


def test_digest_cap_bounds_the_summary():
    s = _long_session(150)
    st = ReplaySettings(window=8_000, reserve=1_000, keep_recent=800, summary_max_tokens=300)
    capped = run(s, "digest-cap", st, stacking)
    assert capped and all(len(e.summary) <= 300 * 4 for e in capped)
    assert max(len(e.summary) for e in run(s, "baseline", st, stacking)) > 300 * 4


def test_fallback_trim_replaces_a_compaction_that_leaves_the_context_too_full():
    s = _long_session(60)
    st = ReplaySettings(window=8_000, reserve=1_000, keep_recent=800)
    trimmed = run(s, "fallback-trim", st, echo_all)
    fell = [e for e in trimmed if e.meta.get("fallback") == "hard-trim"]
    assert fell, "the echoing summarizer must push some compaction over 75% of the window"
    for e in fell:
        assert e.summary == "" and e.tokens_after <= FALLBACK_RATIO * st.window
        assert e.invariants.lost_chars > 0  # a hard trim drops the head unsummarized
    base = run(s, "baseline", st, echo_all)
    assert any(e.tokens_after > FALLBACK_RATIO * st.window for e in base)


def test_skip_redundant_never_repeats_a_first_kept_message():
    """Seed 004: compactions 2/3 and 6/7 shared a firstKeptEntryId (the second re-summarized
    the same range). Here an echoing summarizer leaves the context over the threshold, so the
    baseline compacts again before the kept tail has moved."""
    b = Builder()
    for k in range(5):
        b.user(f"notes {k}\n" + "n" * 4_000)
        b.say("noted")
    filler_turns(b, 80, chars=40, nudge=False)
    s = b.session()
    st = ReplaySettings(window=6_000, reserve=500, keep_recent=700)
    base = run(s, "baseline", st, echo_all)
    skip = run(s, "skip-redundant", st, echo_all)

    def repeats(evs):
        return sum(a.first_kept_id == b.first_kept_id for a, b in itertools.pairwise(evs))

    assert repeats(base) > 0
    assert skip and repeats(skip) == 0


def test_bridge_replaces_the_banner_and_never_stacks():
    s = _long_session(60)
    evs = run(s, "bridge")
    assert len(evs) >= 2
    summary_msg = next(e["message"] for e in evs[0].new_context if "message" in e)
    assert summary_msg["blocks"][-1]["text"].startswith(BRIDGE)
    assert "Compacted from" not in summary_msg["blocks"][-1]["text"]
    assert summary_msg["meta"]["tokens_before"] == evs[0].tokens_before
    assert BRIDGE not in prompt(evs[1], s)  # the next summarizer sees the summary alone


def test_state_sections_and_short_change_the_instructions_and_compose():
    s = _long_session(30)
    system = {
        arm: resolve_request(run(s, arm)[0], s).messages[0]["content"]
        for arm in ("baseline", "state-sections", "short", "state-sections+short")
    }
    assert "## Tests & Errors (latest)" in system["state-sections"]
    assert "## Failed approaches / don't retry" in system["state-sections"]
    assert "## Next Step\n" in system["state-sections"] and "## Next Steps" not in system["state-sections"]
    assert "700 words" in system["short"] and "## Tests & Errors" not in system["short"]
    both = system["state-sections+short"]
    assert "700 words" in both and "## Tests & Errors (latest)" in both
    assert "700 words" not in system["baseline"] and "Tests & Errors" not in system["baseline"]


def test_carry_all_carries_every_user_message_within_its_budget():
    b = Builder()
    texts = [f"Rule {k}: never touch dir_{k}/." for k in range(7)]
    for t in texts:
        b.user(t)
        filler_turns(b, 2, tag=t[:6])
    filler_turns(b, 10, nudge=False)
    s = b.session()
    assert run(s, "carry-all")[0].carried == texts
    assert run(s, "baseline")[0].carried == [texts[0], *texts[-3:]]
    # Over budget: each cut to 8,000 chars, then the first plus the most recent that fit.
    b = Builder()
    for k in range(6):
        b.user(f"paste {k}\n" + str(k) * 9_000)
        filler_turns(b, 2)
    filler_turns(b, 40, nudge=False)
    st = ReplaySettings(window=20_000, reserve=1_000, keep_recent=800, summary_source_chars=0)
    carried = run(b.session(), "carry-all", st)[0].carried
    assert all(len(c) <= USER_CAP for c in carried) and sum(map(len, carried)) <= USERS_CAP
    assert carried[0].startswith("paste 0") and carried[-1].startswith("paste 5") and len(carried) == 4


def test_validate_appends_tally_constraints_and_next_step_the_summary_lacks():
    b = Builder()
    b.user("Fix the importer.\nNever modify anything under migrations/.")
    b.tool("Bash", {"command": "pytest -q"}, "....F\n1 failed, 4 passed in 0.1s\n", is_error=True)
    filler_turns(b, 20)
    s = b.session()
    thin = fixed("## Goal\n- fix the importer")
    base = run(s, "baseline", client=thin)[0]
    val = run(s, "validate", client=thin)[0]
    assert base.summary == "## Goal\n- fix the importer"
    assert "1 failed, 4 passed in 0.1s" in val.summary and "`pytest -q`" in val.summary
    assert "Never modify anything under migrations/." in val.summary
    assert "## Next Step\n1. " in val.summary
    # Nothing is appended twice when the summary already has it.
    full = run(s, "validate", client=fixed(val.summary))[0]
    assert full.summary == val.summary


def test_masking_replaces_old_outputs_without_a_summarizer():
    s = _long_session(40)
    evs = run(s, "masking", client=fixed("unused"))
    assert evs and all(e.request is None and e.summary == "" for e in evs)
    ev = evs[0]
    text = visible(ev, s)
    assert "[tool output omitted:" in text
    assert ev.tokens_after < ev.tokens_before / 2
    assert ev.invariants.lost_chars == 0 and ev.truncated_chars > 0 and ev.invariants.tool_pairs_valid


def test_aa_is_the_baseline_under_another_replicate():
    s = _long_session(60)

    def norm(e: Event) -> dict:
        d = json.loads(e.to_json())
        for k in ("arm", "replicate", "request_key"):
            d.pop(k)
        d["request"].pop("replicate")
        return d

    base, aa = run(s, "baseline"), run(s, "aa")
    assert [e.replicate for e in aa] == [1] * len(aa) and [e.replicate for e in base] == [0] * len(base)
    assert [norm(e) for e in base] == [norm(e) for e in aa]
    assert all(a.request_key != b.request_key for a, b in zip(base, aa, strict=True))


def test_recorded_trigger_fires_at_the_recorded_compactions_only():
    b = Builder()
    b.user("Go.")
    filler_turns(b, 8)
    marker = b.recorded_compaction()
    filler_turns(b, 8)
    s = b.session()
    st = ReplaySettings(trigger="recorded", keep_recent=800)
    evs = run(s, "baseline", st)
    assert len(evs) == 1 and evs[0].trigger == "recorded"
    assert evs[0].at_message == s.messages.index(marker)
    assert all(e.get("ref") != marker.id for e in evs[0].new_context)


def test_compositions_and_unknown_names():
    pol = policy_for("head-tail+validate")
    assert pol.renderer == "head-tail" and len(pol.postprocess) == 1 and pol.name == "head-tail+validate"
    with pytest.raises(KeyError, match="unknown candidate 'nope'"):
        policy_for("baseline+nope")


def test_candidates_command_lists_every_arm_with_its_evidence(capsys):
    from evalkit.cli import main

    assert main(["candidates"]) == 0
    out = capsys.readouterr().out
    for e in ARMS:
        assert e.name in out and e.description in out
        if e.info["evidence"] != "-":
            assert f"evidence: {e.info['evidence']}" in out


def test_recorded_compaction_with_nothing_to_summarize_is_counted(tmp_path):
    # Issue #13: a recorded compaction right after the first request leaves nothing to summarize;
    # replay makes no event for it, and says so instead of skipping it silently.
    from evalkit.corpus import write_corpus
    from evalkit.replay import SessionCache, replay_corpus

    b = Builder()
    b.user("Go.")
    b.recorded_compaction()
    filler_turns(b, 8)
    b.recorded_compaction()
    filler_turns(b, 8)
    s = b.session()
    st = ReplaySettings(trigger="recorded", keep_recent=800)
    cache = SessionCache(s, st.tokenizer)
    evs = replay_session(s, "baseline", st, MODEL, make_client(MODEL), cache)
    assert len(evs) == 1
    assert cache.nothing_to_summarize == {"baseline": 1}
    write_corpus([s], tmp_path / "corpus", source="test", kind="test")
    replay_corpus(
        tmp_path / "corpus",
        tmp_path,
        ReplayConfig(arms=["baseline"], trigger="recorded", keep_recent=800, workers=1),
        MODEL,
    )
    got = json.loads((tmp_path / "events" / "recorded_nothing_to_summarize.json").read_text())
    assert got == {"baseline": 1}


def test_uncompacted_keeps_everything_and_is_asked_along_the_session():
    """The ceiling arm: never removes a message nor calls a summarizer; an event each time the
    context has grown by keep_recent tokens, so probes are asked against the full history."""
    s = _long_session(60)
    evs = run(s, "uncompacted", client=fixed("unused"))
    assert len(evs) >= 3 and all(e.request is None and not e.removed_ids for e in evs)
    assert all(e.tokens_after == e.tokens_before and e.meta == {"uncompacted": True} for e in evs)
    assert all(b.tokens_after - a.tokens_after >= SMALL.keep_recent for a, b in itertools.pairwise(evs))
    assert len(resolve_context(evs[-1], {m.id: m for m in s.messages})) == evs[-1].at_message + 1
    # The arm reads the engine's running count (Job.context_tokens) instead of recounting the
    # whole context at every turn: the two agree at every event.
    by_id = {m.id: m for m in s.messages}
    for e in evs:
        recount = sum(message_tokens(m, SMALL.tokenizer) for m in resolve_context(e, by_id))
        assert e.tokens_before == recount


def test_the_banner_counts_the_context_it_compacted():
    """The splice's "Compacted from N tokens" reads the engine's running count (not a recount of
    the context): N is the recount of what the first compaction saw, and the event's tokens_before."""
    s = _long_session(60)
    first = run(s, "baseline")[0]
    seen = sum(message_tokens(m, SMALL.tokenizer) for m in s.messages[: first.at_message + 1])
    made = [e["message"] for e in first.new_context if "message" in e]
    banner = next(b["text"] for m in made for b in m["blocks"] if "Compacted from" in b.get("text", ""))
    assert first.tokens_before == seen
    assert f"Compacted from {seen} tokens" in banner
