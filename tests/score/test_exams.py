"""Exams that check themselves (issue #38): grades on word and number boundaries, the `once`
trigger, every exam's ceiling against its floor, the recovery arm, and the bank friction items."""

from __future__ import annotations

import json
import math
import re

import pandas as pd
import pytest

from evalkit.cli import main
from evalkit.contracts.config import ModelConfig
from evalkit.contracts.exit_codes import EXIT_GATE_FAILED
from evalkit.facts import compute_facts
from evalkit.models.extractive import LABEL as EXTRACTIVE_LABEL
from evalkit.replay.candidates import BRIDGE
from evalkit.replay.engine import replay_session
from evalkit.replay.settings import ReplaySettings
from evalkit.replay.splice import SPLICE_PREFIX
from evalkit.report.sections.scorecard import unpaired, win_loss_tie
from evalkit.score import ProbeInput, SessionView
from evalkit.score.banks import BankError, bank, grade_text, parse_bank, pin_banks
from evalkit.score.examcheck import check_exam, exam_of, question_means
from evalkit.score.factmatch import Fact, stated, strip_harness
from evalkit.score.judge_model import DIMENSIONS
from evalkit.score.stage import ScoreContext
from tests.conftest import ROOT
from tests.support.probe_sessions import Builder, event


def q(*facts, lexical=True):
    return {"id": "b/q", "kind": "recall", "text": "?", "expected": list(facts), "lexical": lexical}


# -- 1. grades that match meaning ------------------------------------------------------------


@pytest.mark.parametrize(
    ("fact", "text"),
    [
        ("11", "the file has 4283 lines"),  # a number inside a longer number
        ("3", "read 4283 chars"),
        ("3", "version 3.5 is out"),  # 3 is not 3.5
        ("283", "4,283 characters"),
        ("no", "this is not a model"),  # a word inside a word
        ("test", "the tests ran"),
        ("renderer.py", "edited markdown_renderer.py"),  # an identifier inside a longer one
        ("correct", "incorrect"),
    ],
)
def test_no_fact_is_found_inside_a_longer_number_or_word(fact, text):
    assert stated([Fact((fact,))], text) == [False]


@pytest.mark.parametrize(
    ("fact", "text"),
    [
        ("11", "11 failed, 3 passed"),
        ("4283", "the file holds 4,283 lines."),  # numbers compared as numbers
        ("3", "(3) retries"),
        ("renderer.py", "deleted claude_code_log/renderer.py, then"),
        ("uv run pytest -m browser", "ran `uv  run pytest\n-m browser` again"),  # whitespace folded
        ("type: ignore[misc]", "added # type: ignore[misc] there"),
        ("2025-06-18 10:30:00", "last: 2025-06-18 10:30:00 UTC"),
    ],
)
def test_a_fact_stated_on_its_boundaries_is_found(fact, text):
    assert stated([Fact((fact,))], text) == [True]


def test_alternatives_need_one_and_required_facts_need_all():
    bank_ = parse_bank(
        {
            "probes": [
                {
                    "type": "recall",
                    "question": "How many?",
                    "expected_facts": ["tests"],
                    "any_of": ["11", "eleven"],
                }
            ]
        },
        "s.probes.json",
    )
    jq = bank_[0].as_judge_question()
    assert jq["expected"] == ["tests", ["11", "eleven"]]
    assert grade_text(jq, "eleven tests failed") == 1.0
    assert grade_text(jq, "11 tests failed") == 1.0
    assert grade_text(jq, "4283 tests failed") == 0.5  # "11" is not inside 4283
    nested = parse_bank(
        {
            "probes": [
                {"type": "recall", "question": "?", "expected_facts": [["a.py", "b.py"], {"any_of": ["x"]}]}
            ]
        },
        "s.probes.json",
    )
    assert nested[0].expected_facts == (Fact(("a.py", "b.py")), Fact(("x",)))


def test_harness_text_never_answers_a_question():
    """The splice banner's token count, the bridge sentence and the stand-in's label are text the
    harness wrote: a fact found only there is not stated."""
    banner = SPLICE_PREFIX.format(n=4283)
    assert stated([Fact(("4283",))], strip_harness(banner + "summary text")) == [False]
    assert stated([Fact(("4283",))], strip_harness(banner + "a 4283-line log")) == [True]
    for injected, fact in [
        (EXTRACTIVE_LABEL, "a model"),
        (BRIDGE, "on disk"),
        ("[prior summary, 11 tokens]", "11"),
    ]:
        assert stated([Fact((fact,))], strip_harness(f"{injected}\nnothing else")) == [False], injected


def test_a_sentence_fact_is_not_gradable_by_the_lexical_check_and_never_scores_zero():
    """A hermes fact written as a sentence would need the same wording: the question is counted as
    not gradable (no row), not graded 0."""
    b = Builder()
    b.user("Fix the parser please.")
    b.tool("Bash", {"command": "pytest"}, "11 passed")
    b.user("thanks")
    b.add("assistant")
    s = b.session()
    long_fact = "the agent ran the whole test suite and every test passed in the end"
    qs = [
        {**q("11 passed"), "id": "b/short", "source": None, "until": None},
        {**q(long_fact, lexical=False), "id": "b/long", "source": None, "until": None},
    ]
    view = SessionView(s, compute_facts(s))
    view.extras["ctx"] = ScoreContext("", ModelConfig(backend="extractive"), {s.id: qs})
    got = {v.metric: v.value for v in bank(ProbeInput(event(s, 5, 1, "summary"), view))}
    assert got == {"exam_offline_q:b/short@5": 1.0, "exam_offline": 1.0, "exam_offline_recall": 1.0}
    assert grade_text(qs[1], long_fact) is None


@pytest.mark.parametrize("fact", ["correct", "No", "approved"])
def test_a_one_word_verdict_is_not_gradable_by_the_lexical_check(fact):
    """A reviewer's verdict "correct" would be found in a PR title that uses the word."""
    assert not Fact((fact,)).gradable() and grade_text(q(fact), "fix: correct the PR title") is None
    assert Fact(("correct_horse",)).gradable()


def test_hermes_bank_files_load_unchanged(tmp_path):
    p = tmp_path / "abc.probes.json"
    p.write_text(
        json.dumps({"probes": [{"id": "x", "type": "recall", "question": "?", "expected_facts": ["a", "b"]}]})
    )
    from evalkit.score.banks import load_bank

    (qq,) = load_bank(p)
    assert qq.session == "abc" and qq.expected_facts == (Fact(("a",)), Fact(("b",)))


# -- 2. the once trigger and pairing at the same point ----------------------------------------


def long_session(turns: int = 30):
    b = Builder()
    for k in range(turns):
        b.user(f"step {k}: do the thing number {k}")
        b.tool("Bash", {"command": f"run {k}"}, f"output {k} " + "x" * 400)
        b.add("assistant")
    return b.session()


@pytest.mark.parametrize("at", [0.5, 1.0])
def test_once_compacts_exactly_once_at_the_same_point_for_every_arm(at):
    s = long_session()
    settings = ReplaySettings(trigger="once", once_at=at, keep_messages=6)
    model = ModelConfig(backend="extractive", model="extractive-v1")
    points = {}
    for arm in ("baseline", "masking", "no-history", "uncompacted", "recover"):
        evs = replay_session(s, arm, settings, model)
        assert len(evs) == 1, arm
        points[arm] = evs[0].at_message
    assert len(set(points.values())) == 1
    n = len(s.messages)
    expected = (
        n - 1
        if at == 1.0
        else next(
            i for i in range(math.ceil(at * n) - 1, n) if i + 1 < n and s.messages[i + 1].role == "assistant"
        )
    )
    assert points["baseline"] == expected


def test_once_at_must_be_a_fraction():
    with pytest.raises(ValueError, match="once_at"):
        ReplaySettings(trigger="once", once_at=0)


def test_paired_counts_pair_the_same_question_at_the_same_point_and_count_the_rest_apart():
    g = pd.DataFrame(
        [
            ("baseline", "s", "exam_offline_q:b/1@10", 0.0),
            ("cand", "s", "exam_offline_q:b/1@10", 1.0),  # same point: a win
            ("baseline", "s", "exam_offline_q:b/2@10", 1.0),
            ("cand", "s", "exam_offline_q:b/2@40", 0.0),  # another point: unpaired, not a loss
        ],
        columns=["arm", "session", "metric", "value"],
    )
    assert win_loss_tie(g, "cand", "baseline") == (1, 0, 0)
    assert unpaired(g, "cand", "baseline") == 2


# -- 3. every exam checks itself ----------------------------------------------------------------


def grades_frame(ceiling, floor, question="b/{}@5"):
    """Question-table rows (evalkit.contracts.questions) of the bank exam graded offline."""
    rows = [("exam_offline", question.format(i), "uncompacted", "s", v) for i, v in enumerate(ceiling)]
    rows += [("exam_offline", question.format(i), "no-history", "s", v) for i, v in enumerate(floor)]
    return pd.DataFrame(rows, columns=["exam", "question", "arm", "session", "grade"])


def test_an_exam_whose_ceiling_beats_its_floor_significantly_is_usable():
    c = check_exam(question_means(grades_frame([1.0] * 8, [0.0] * 8)), "bank exam", 0.025)
    assert c.usable and (c.ceiling_wins, c.floor_wins, c.ties) == (8, 0, 0)
    assert c.p_value == pytest.approx(0.5**8)


@pytest.mark.parametrize(
    ("ceiling", "floor"),
    [([1.0] * 5, [0.0] * 5), ([1.0] * 8, [1.0] * 8), ([0.0] * 8, [1.0] * 8)],
    ids=["too-few", "all-ties", "floor-higher"],
)
def test_an_exam_that_cannot_tell_ceiling_from_floor_is_unusable_with_its_numbers(ceiling, floor):
    c = check_exam(question_means(grades_frame(ceiling, floor)), "bank exam", 0.025)
    assert not c.usable
    assert re.search(r"unusable: .*W / \d+ L / \d+ T, sign test p = ", c.reason)


def test_an_exam_without_its_floor_is_unusable_and_says_which_arm_is_missing():
    g = grades_frame([1.0] * 8, [])
    c = check_exam(question_means(g), "bank exam", 0.025)
    assert not c.usable and "no-history" in c.reason


def test_exam_metrics_map_to_their_exam_and_search_tokens_do_not():
    assert exam_of("judge_offline_overall") == "generated exam"
    assert exam_of("exam_offline_recall") == "bank exam"
    assert exam_of("identifier_exam") == "identifier exam"
    assert exam_of("exam_search_tokens") is None and exam_of("tally_present") is None


def test_a_verdict_resting_on_an_unusable_exam_is_untested(tmp_path):
    from evalkit.decide.health import annotate_decision, verdict_notes
    from evalkit.decide.rules import parse_rules

    exams = {"generated exam": {"exam": "generated exam", "usable": False, "reason": "unusable: numbers"}}
    rules = parse_rules(
        {
            "metrics": {"judge_offline_overall": {"direction": "higher"}},
            "candidates": {"recover": {"success": ["judge_offline_overall"]}},
        },
        "test",
    )
    flags = {"judge_offline_overall": {"unhealthy": []}}
    notes = verdict_notes(rules, flags, {}, ["recover"], exams)
    assert notes["recover"] == [
        "success metric judge_offline_overall: unusable exam (generated exam): unusable: numbers"
    ]
    (tmp_path / "health.json").write_text(json.dumps({"verdict_notes": notes}))
    d = annotate_decision(tmp_path, {"verdicts": {"recover": {"verdict": "ship", "reason": "better"}}})
    assert d["verdicts"]["recover"]["verdict"] == "untested"


def run_cfg(tmp_path, arms, extra="", sessions=2, corpus=None):
    cfg = tmp_path / "exp.toml"
    # Synthetic sessions of ~150k tokens (a default one holds ~800k) under a 60k window: a few
    # compactions each, at a fraction of the replay and scoring time.
    src = (
        f'kind = "path"\npath = "{corpus}"\n'
        if corpus
        else f'kind = "synth"\nsessions = {sessions}\nsession_tokens = 150000\n'
    )
    small = "" if corpus or "window" in extra else "window = 60000\nreserve = 4000\nkeep_recent = 8000\n"
    cfg.write_text(
        f'name = "t"\n[corpus]\n{src}[replay]\narms = {json.dumps(arms)}\nworkers = 1\n{small}{extra}'
        "[continuation]\nenabled = false\n"
    )
    return cfg


def test_the_default_report_shows_each_exams_check_and_no_hand_written_artefact_note(tmp_path):
    cfg = run_cfg(tmp_path, ["baseline", "recover", "uncompacted", "no-history"], sessions=2)
    assert main(["run", "--config", str(cfg), "--run-dir", str(tmp_path / "r")]) == 0
    health = json.loads((tmp_path / "r" / "health.json").read_text())
    gen = health["exams"]["generated exam"]
    assert gen["questions"] > 0 and gen["ceiling_mean"] > gen["floor_mean"]
    md = (tmp_path / "r" / "report" / "report.md").read_text()
    sc = md.split("## Scorecard: exam score vs tokens kept")[1].split("\n## ")[0]
    assert "artefact" not in md and "Does each exam tell the ceiling" in sc
    assert "- **generated exam**: " + gen["reason"] in sc
    hs = md.split("## Metric health")[1].split("\n## ")[0]
    usable = "yes" if gen["usable"] else "**no**"
    assert "**Exams: does the ceiling beat the floor?**" in hs and f"| generated exam | {usable} |" in hs
    assert "| bank exam | n/a | not asked in this run |" in hs
    assert "| `no-history` (floor) |" in sc and "| `uncompacted` (ceiling) |" in sc
    # the recovery arm: placed on the scorecard, charged its search
    assert re.search(r"\| `recover` \| [\d,]+ \+ [\d,]+ search \|", sc)
    decision = json.loads((tmp_path / "r" / "decision.json").read_text())
    assert "uncompacted" not in decision["verdicts"] and "no-history" not in decision["verdicts"]
    # recover's verdict rests on the generated exam: untested whenever that exam is unusable
    if not gen["usable"]:
        assert decision["verdicts"]["recover"]["verdict"] == "untested"
        assert "unusable exam (generated exam)" in decision["verdicts"]["recover"]["reason"]


def verdict(score: int) -> str:
    """A judge's reply scoring every dimension ``score``."""
    return json.dumps({**dict.fromkeys(DIMENSIONS, score), "rationale": "ok"})


# -- 4. the recovery arm ----------------------------------------------------------------------


def recovery_case():
    b = Builder()
    b.user("Fix the login bug.")
    b.tool("Bash", {"command": "pytest tests/test_login.py"}, "E   KeyError: 'session_token'\n1 failed")
    for k in range(6):
        b.user(f"also tidy module {k}")
        b.add("assistant")
    s = b.session()
    qs = [
        {
            "id": "b/err",
            "kind": "recall",
            "text": "Which KeyError did the login test fail with?",
            "expected": ["session_token"],
            "lexical": True,
            "source": None,
            "until": None,
        }
    ]
    return s, qs


def test_the_recovery_search_finds_what_the_compaction_removed_and_is_charged(tmp_path):
    s, qs = recovery_case()
    view = SessionView(s, compute_facts(s))
    view.extras["ctx"] = ScoreContext("", ModelConfig(backend="extractive"), {s.id: qs})
    at = len(s.messages) - 1
    plain = event(s, at, 5, "summary without the error")
    rec = event(s, at, 5, "summary without the error", meta={"recovery": {"searches": 1}})
    base = {v.metric: v.value for v in bank(ProbeInput(plain, view))}
    got = {v.metric: v.value for v in bank(ProbeInput(rec, view))}
    assert base["exam_offline"] == 0.0 and "exam_search_tokens" not in base
    assert got["exam_offline"] == 1.0 and got["exam_search_tokens"] > 0


def test_the_recovery_arm_runs_against_the_fake_server_with_the_model_choosing_the_query(fake_server):
    """Real HTTP: the answering model is asked for a query (purpose "search"), the lexical search
    runs with it, the answer call carries what it found, and its tokens are charged."""
    from evalkit.testing.faults import Rule
    from evalkit.testing.serverlog import read_log

    s, qs = recovery_case()
    grades = verdict(5)
    srv = fake_server(
        script=[
            Rule(reply="KeyError login test", match="You may search them once"),
            Rule(reply=grades, match="expected_facts"),
            Rule(reply="KeyError: 'session_token'"),
        ]
    )
    model = ModelConfig(backend="openai", model="m", base_url=srv.url, max_retries=0, cache="off")
    view = SessionView(s, compute_facts(s))
    view.extras["ctx"] = ScoreContext("", model, {s.id: qs})
    at = len(s.messages) - 1
    rec = event(s, at, 5, "summary", meta={"recovery": {"searches": 1}})
    got = {v.metric: (v.value, v.error) for v in bank(ProbeInput(rec, view))}
    assert got["exam"] == (1.0, None) and got["exam_search_tokens"][0] > 0
    log = [e for e in read_log(srv.log_path) if e.get("key")]
    assert [e["purpose"] for e in log] == ["search", "answer", "judge"]


def test_the_recovery_arm_replays_and_scores_offline(tmp_path):
    cfg = run_cfg(tmp_path, ["baseline", "recover"], sessions=1)
    assert main(["run", "--config", str(cfg), "--run-dir", str(tmp_path / "r")]) == 0
    evs = [json.loads(x) for x in (tmp_path / "r" / "events" / "recover.jsonl").read_text().splitlines()]
    assert evs and all(e["meta"]["recovery"] == {"searches": 1} for e in evs)
    from evalkit.contracts.metrics import read_metrics

    m = read_metrics(tmp_path / "r" / "metrics.parquet")
    spent = m[(m["metric"] == "judge_search_tokens") & (m["arm"] == "recover")]["value"]
    assert len(spent) and (spent > 0).all()


# -- 5. friction --------------------------------------------------------------------------------


def bank_file(tmp_path, sid, facts=("x",), name=None):
    p = tmp_path / (name or f"{sid}.probes.json")
    p.write_text(
        json.dumps(
            {"probes": [{"id": "q1", "type": "recall", "question": "?", "expected_facts": list(facts)}]}
        )
    )
    return p


def synth_ids(run):
    return [json.loads(x)["id"] for x in (run / "corpus" / "sessions.jsonl").read_text().splitlines()]


def test_a_zero_compaction_run_says_why_and_exits_with_the_nothing_to_judge_code(tmp_path, capsys):
    cfg = run_cfg(tmp_path, ["baseline"], extra="window = 100000000\n", sessions=1)
    code = main(["run", "--config", str(cfg), "--run-dir", str(tmp_path / "r")])
    assert code == EXIT_GATE_FAILED
    err = capsys.readouterr().err
    assert "nothing to judge: no arm compacted any of the 1 session(s) under trigger = 'tokens'" in err
    assert "the threshold is 99,983,616 tokens" in err and (tmp_path / "r" / "report" / "report.md").exists()


def test_a_mistyped_bank_glob_fails_before_replay(tmp_path, capsys):
    cfg = run_cfg(tmp_path, ["baseline"], extra='[score]\nbanks = ["nope/*.json"]\n', sessions=1)
    assert main(["run", "--config", str(cfg), "--run-dir", str(tmp_path / "r")]) == 2
    assert "matches no file" in capsys.readouterr().err
    assert not (tmp_path / "r" / "events").exists()  # no replay, so no summarizer call


def test_a_bank_about_no_session_of_the_corpus_fails_before_replay(tmp_path, capsys):
    bank_file(tmp_path, "not-a-session")
    cfg = run_cfg(tmp_path, ["baseline"], extra='[score]\nbanks = ["*.probes.json"]\n', sessions=1)
    assert main(["run", "--config", str(cfg), "--run-dir", str(tmp_path / "r")]) == 2
    assert "no question names a session of the corpus" in capsys.readouterr().err
    assert not (tmp_path / "r" / "events").exists()


def test_questions_for_sessions_missing_from_the_corpus_are_said_and_counted(tmp_path, capsys):
    run = tmp_path / "r"
    (run / "corpus").mkdir(parents=True)
    (run / "corpus" / "sessions.jsonl").write_text(json.dumps({"id": "s1"}) + "\n")
    bank_file(tmp_path, "s1")
    bank_file(tmp_path, "s2")
    pin_banks(["*.probes.json"], tmp_path, run)
    assert "banks: session 's2' is not in the corpus: its 1 question(s) skipped" in capsys.readouterr().err
    assert list(json.loads((run / "corpus" / "banks.json").read_text())) == ["s1"]
    with pytest.raises(BankError, match="matches no file"):
        pin_banks(["missing*.json"], tmp_path, run)
    (tmp_path / "s1.probes.json").unlink()
    with pytest.raises(BankError, match="no question names a session of the corpus"):
        pin_banks(["*.probes.json"], tmp_path, run)
    pin_banks(["*.probes.json"], tmp_path, run, require_match=False)  # a shard holding none of them
    assert json.loads((run / "corpus" / "banks.json").read_text()) == {}


def test_editing_a_bank_regrades_on_resume(tmp_path, capsys):
    cfg = run_cfg(tmp_path, ["baseline"], extra='trigger = "once"\nkeep_messages = 10\n', sessions=1)
    assert main(["run", "--config", str(cfg), "--run-dir", str(tmp_path / "r")]) == 0
    (sid,) = synth_ids(tmp_path / "r")
    bank_file(tmp_path, sid, ("zzzz-not-there",))
    cfg.write_text(
        cfg.read_text().replace("[continuation]", '[score]\nbanks = ["*.probes.json"]\n[continuation]')
    )
    run = ["run", "--config", str(cfg), "--run-dir", str(tmp_path / "r2")]
    assert main(run) == 0
    capsys.readouterr()
    bank_file(tmp_path, sid, ("zzzz-not-there", "the"))  # edited: one more fact
    assert main([*run, "--resume"]) == 0
    err = capsys.readouterr().err
    assert "resume: score runs again: inputs changed (banks)" in err
    assert "resume: replay is complete, skipped" in err
    banks = json.loads((tmp_path / "r2" / "corpus" / "banks.json").read_text())
    assert banks[sid][0]["expected"] == ["zzzz-not-there", "the"]


def test_probes_import_writes_where_told_or_into_a_run_never_into_the_checkout(tmp_path, capsys, monkeypatch):
    src = bank_file(tmp_path, "s1", name="s1.probes.json")
    monkeypatch.chdir(tmp_path)
    assert main(["probes", "import", str(src)]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["format"] == "evalkit.bank/1" and "1 questions" in out.err
    assert not (tmp_path / "probes").exists()
    (tmp_path / "run").mkdir()
    assert main(["probes", "import", str(src), "--run", str(tmp_path / "run")]) == 0
    assert json.loads((tmp_path / "run" / "banks" / "s1.json").read_text())["questions"][0]["id"] == "q1"
    assert main(["probes", "import", str(src), "--run", str(tmp_path / "nope")]) == 2


def test_the_report_lists_each_bank_question_with_each_arms_grade_and_collapses_long_banks(tmp_path):
    cfg = run_cfg(
        tmp_path, ["baseline", "uncompacted"], extra='trigger = "once"\nkeep_messages = 10\n', sessions=1
    )
    assert main(["run", "--config", str(cfg), "--run-dir", str(tmp_path / "r")]) == 0
    (sid,) = synth_ids(tmp_path / "r")
    probes = [
        {"id": f"q{i:02d}", "type": "recall", "question": f"question {i}?", "expected_facts": ["the"]}
        for i in range(25)
    ]
    probes.append(
        {
            "id": "long",
            "type": "recall",
            "question": "?",
            "expected_facts": ["one two three four five six seven"],
        }
    )
    (tmp_path / f"{sid}.probes.json").write_text(json.dumps({"probes": probes}))
    cfg.write_text(
        cfg.read_text().replace("[continuation]", '[score]\nbanks = ["*.probes.json"]\n[continuation]')
    )
    assert main(["run", "--config", str(cfg), "--run-dir", str(tmp_path / "r2")]) == 0
    md = (tmp_path / "r2" / "report" / "report.md").read_text()
    sec = md.split("## Bank questions")[1].split("\n## ")[0]
    assert "graded by the lexical check (facts matched on word and number boundaries: not a model)" in sec
    assert "bank exam (`exam_offline`, lexical check)" in md  # the scorecard labels it too
    assert "| question | kind | asked | expected facts | `baseline` | `uncompacted` |" in sec
    first, rest = sec.split("<details><summary>6 more question(s)</summary>")
    assert first.count(f"| `{sid}/q") == 20 and "</details>" in rest
    assert re.search(rf"\| `{sid}/q00` \| recall \| question 0\? \| the \| 100% \| 100% \|", first)
    assert re.search(
        rf"\| `{sid}/long` \| recall \| \? \| one two three four five six seven \| n/g \| n/g \|", rest
    )


def test_a_run_with_the_recovery_arm_against_the_fake_server_charges_its_search(
    tmp_path, transcripts, fake_server, monkeypatch
):
    """End to end over real HTTP: the summarizer, the search query, the answers and the judge are
    all calls to the fake server; the recovery arm's bank rows carry its search tokens."""
    from evalkit.testing.faults import Rule
    from evalkit.testing.serverlog import read_log

    sid = "12a546d1-83a7-49a6-abba-5400db340b43"
    corpus = tmp_path / "corpus"
    src = next((transcripts / "claude-code" / "daaain-claude-code-log").glob(f"*{sid}.jsonl"))
    assert main(["import", "auto", str(src), "--out", str(corpus)]) == 0
    grades = verdict(3)
    srv = fake_server(
        script=[
            Rule(reply="failing browser test", match="You may search them once"),
            Rule(reply=grades, match="expected_facts"),
        ]
    )
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    bank_src = (ROOT / "probes" / "banks" / f"{sid}.probes.json").as_posix()
    cfg = run_cfg(
        tmp_path,
        ["baseline", "recover"],
        extra='trigger = "once"\nkeep_messages = 6\n'
        f'[model]\nbackend = "openai"\nmodel = "m"\nbase_url = "{srv.url}"\nmax_retries = 0\n'
        f'[score]\nbanks = ["{bank_src}"]\n',
        corpus=corpus,
    )
    assert main(["run", "--config", str(cfg), "--run-dir", str(tmp_path / "r")]) == 0
    from evalkit.contracts.metrics import read_metrics

    m = read_metrics(tmp_path / "r" / "metrics.parquet")
    spent = m[m["metric"] == "exam_search_tokens"]
    assert set(spent["arm"]) == {"recover"} and (spent["value"] > 0).all()
    exam = m[(m["metric"] == "exam") & m["error"].isna()].groupby("arm")["value"].mean()
    assert exam["recover"] == exam["baseline"] == pytest.approx(0.6)  # the scripted judge: 3 / 5
    purposes = [e.get("purpose") for e in read_log(srv.log_path) if e.get("key")]
    # one query per question the recovery arm was asked: the 8 of the bank and the generated exam's
    from evalkit.contracts import questions

    q = questions.read(tmp_path / "r")
    judged = int(((q["arm"] == "recover") & (q["exam"] == "judge")).sum())
    assert judged > 0 and purposes.count("search") == 8 + judged
    assert purposes.count("summarize") >= 1


def test_sharded_runs_pin_their_sessions_banks_and_the_merge_joins_them(tmp_path):
    """A shard holding none of a bank's sessions runs on; the merged run pins the same questions
    as the local run."""
    cfg = run_cfg(tmp_path, ["baseline"], extra='trigger = "once"\nkeep_messages = 10\n', sessions=2)
    assert main(["run", "--config", str(cfg), "--run-dir", str(tmp_path / "local0")]) == 0
    first, _ = synth_ids(tmp_path / "local0")
    bank_file(tmp_path, first, ("the",))
    cfg.write_text(
        cfg.read_text().replace("[continuation]", '[score]\nbanks = ["*.probes.json"]\n[continuation]')
    )
    assert main(["run", "--config", str(cfg), "--run-dir", str(tmp_path / "local")]) == 0
    sharded = ["run", "--config", str(cfg), "--executor", "local", "--shards", "2"]
    assert main([*sharded, "--run-dir", str(tmp_path / "sharded")]) == 0
    local = (tmp_path / "local" / "corpus" / "banks.json").read_bytes()
    assert json.loads(local)[first][0]["id"] == f"{first}/q1"
    assert (tmp_path / "sharded" / "corpus" / "banks.json").read_bytes() == local


def test_the_recovery_search_shares_the_judges_index_and_answers_as_a_fresh_reader():
    """The search reads removed messages through the session's cached index (shared with the
    judge's context and across events): at every event it answers exactly what a fresh,
    uncached reader of the removed texts answers."""
    from evalkit.models import offline_judge
    from evalkit.score.judge import offline_grade
    from evalkit.score.recovery import SEARCH_CHARS, removed_texts, search

    s, qs = recovery_case()
    view = SessionView(s, compute_facts(s))
    view.extras["ctx"] = ScoreContext("", ModelConfig(backend="extractive"), {s.id: qs})
    q = qs[0]["text"]
    found = []
    for n, (at, keep_from) in enumerate([(6, 5), (9, 7), (len(s.messages) - 1, 9), (len(s.messages) - 1, 2)]):
        ev = event(s, at, keep_from, f"summary {n}", n=n, meta={"recovery": {"searches": 1}})
        inp = ProbeInput(ev, view)
        offline_grade({**qs[0], "source": 0, "until": None, "tally": None}, inp, 4000)  # fills the cache
        fresh = offline_judge.answer(q, removed_texts(ProbeInput(ev, view)), SEARCH_CHARS)
        assert search(inp, q) == fresh
        found.append(fresh)
    assert any("session_token" in f for f in found)
    assert view.extras["offline_judge"]  # the index was shared, not rebuilt per event
