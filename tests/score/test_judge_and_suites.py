"""Judge probes (offline grader and a real backend through make_client), suites, and `evalkit score`."""

from __future__ import annotations

import json

import pytest

from evalkit.cli import main
from evalkit.contracts.config import ModelConfig
from evalkit.facts import compute_facts
from evalkit.models import BACKENDS, ChatResponse
from evalkit.score import ProbeInput, SessionView, SuiteError, load_suite
from evalkit.score.judge import DIMENSIONS, build_questions, judge, select_questions
from evalkit.score.stage import ScoreContext
from evalkit.score.suite import find_suite, suite_from_dict
from tests.conftest import ROOT
from tests.support.probe_sessions import Builder, event


def judge_session():
    b = Builder()
    b.user("Fix the parser.\nNever modify anything under migrations/; those files are generated.")
    b.tool(
        "Bash", {"command": "npm run build"}, "src/a.ts:3:7 - error TS2339: Property 'x' does not exist.\n", 2
    )
    b.tool("Edit", {"file_path": "src/parser.py", "old_string": "a", "new_string": "b"}, "updated")
    b.tool("Bash", {"command": "pytest -q"}, "==== 2 failed, 9 passed in 0.3s ====\n", 1)
    b.user("Now add a regression test for the header bug.")  # 9
    b.tool("Read", {"file_path": "README.md"}, "# readme\n")  # 10, 11
    return b.session()


FULL = (
    "## Goal\n- Fix the parser.\n## Constraints\n- Never modify anything under migrations/; those files are generated.\n"
    "## Progress\n- pytest: 9 passed, 2 failed\n- npm run build: src/a.ts:3:7 - error TS2339: Property 'x' does not exist.\n"
    "- edited src/parser.py\n## Next Steps\n1. Now add a regression test for the header bug."
)


def test_questions_are_pinned_deterministic_and_cover_four_kinds():
    s = judge_session()
    f = compute_facts(s)
    qs = build_questions(s, f)
    assert qs == build_questions(s, f)
    assert {q["kind"] for q in qs} == {"recall", "artifact", "continuation", "decision"}
    tally_q = next(q for q in qs if q.get("tally"))
    assert tally_q["tally"] == {"passed": 9, "failed": 2, "errors": 0, "skipped": 0}


def test_only_questions_whose_source_left_the_view_are_asked():
    s = judge_session()
    view = SessionView(s, compute_facts(s))
    all_gone = select_questions(ProbeInput(event(s, 11, 10, "x"), view), per_kind=1)
    assert {q["kind"] for q in all_gone} == {"recall", "artifact", "continuation", "decision"}
    view = SessionView(s, compute_facts(s))
    kept = select_questions(ProbeInput(event(s, 11, 2, "x"), view), per_kind=1)
    assert {q["kind"] for q in kept} == {
        "decision"
    }  # its source (the first user message) left; the rest is kept


@pytest.mark.parametrize(("summary", "score"), [(FULL, 5.0), ("## Goal\n- something", 0.0)])
def test_offline_grader_scores_expected_facts(summary, score):
    s = judge_session()
    inp = ProbeInput(event(s, 11, 10, summary), SessionView(s, compute_facts(s)))
    got = {v.metric: v.value for v in judge(inp)}
    per_q = {m: v for m, v in got.items() if m.startswith("judge_offline_q:")}  # one row per question asked
    assert set(got) - set(per_q) == {
        "judge_offline_overall",
        *(f"judge_offline_{k}" for k in ("recall", "artifact", "continuation", "decision")),
    }
    assert got["judge_offline_overall"] == score
    assert len(per_q) == 4 and set(per_q.values()) == {score}


def test_offline_grader_rejects_a_stale_tally():
    s = judge_session()
    inp = ProbeInput(
        event(s, 11, 10, FULL.replace("9 passed, 2 failed", "8 passed, 3 failed")),
        SessionView(s, compute_facts(s)),
    )
    got = {v.metric: v.value for v in judge(inp)}
    assert got["judge_offline_recall"] < 5.0


CALLS: list = []


def _scripted(settings):
    """A judge backend: answers the test-run question from the context, grades that answer 5, others 1."""

    def call(req):
        CALLS.append(req.purpose)
        if req.purpose == "answer" and req.messages[-1]["content"].endswith("Question: FAIL me"):
            return ChatResponse(None, "scripted", req.model, error="scripted failure")
        if req.purpose == "answer":
            ctx = req.messages[-1]["content"]
            ok = "test run" in ctx.rsplit("Question:", 1)[1] and "9 passed, 2 failed" in ctx
            return ChatResponse("9 passed, 2 failed" if ok else "not in context", "scripted", req.model)
        ans = json.loads(req.messages[-1]["content"])["answer"]
        n = 5 if ans == "9 passed, 2 failed" else 1
        return ChatResponse(
            json.dumps({**dict.fromkeys(DIMENSIONS, n), "rationale": f"answer {ans}"}), "scripted", req.model
        )

    return call


if "scripted-judge" not in BACKENDS:
    BACKENDS.add("scripted-judge", _scripted, "test backend: scripted answers and grades")


def test_model_judge_goes_through_make_client_with_six_dimensions():
    s = judge_session()
    view = SessionView(s, compute_facts(s))
    view.extras["ctx"] = ScoreContext("", ModelConfig(backend="scripted-judge", model="m"))
    CALLS.clear()
    got = {v.metric: v.value for v in judge(ProbeInput(event(s, 11, 10, FULL), view), replicates=2)}
    assert CALLS.count("answer") == CALLS.count("judge") == 2 * 4  # 4 questions x 2 replicates
    assert set(got) >= {"judge_overall", *(f"judge_{d}" for d in DIMENSIONS)}
    assert not any(k.startswith("judge_offline") for k in got)
    assert got["judge_overall"] == pytest.approx((5 + 1 + 1 + 1) / 4)  # only the tally question answered
    assert got["judge_recall"] == 5.0 and got["judge_decision"] == 1.0
    assert view.extras["judgements"][0]["rationale"].startswith("answer")


def test_model_judge_sends_an_events_answers_then_its_judge_calls_and_isolates_a_failed_question(fake_server):
    """Real HTTP: the event's answer calls all reach the server before its first judge call (two
    rounds through ``client.map``, not a call at a time), and a question whose answer is refused
    is left out with its reason while the other questions are graded."""
    from evalkit.testing.faults import Rule
    from evalkit.testing.serverlog import read_log

    s = judge_session()
    qs = select_questions(ProbeInput(event(s, 11, 10, FULL), SessionView(s, compute_facts(s))), per_kind=1)
    refused = next(q for q in qs if q["kind"] == "decision")
    grades = json.dumps({**dict.fromkeys(DIMENSIONS, 4), "rationale": "fine"})
    srv = fake_server(
        script=[
            Rule(reply="I'm sorry, but I can't help with that.", match=f"Question: {refused['text']}"),
            Rule(reply=grades, match="expected_facts"),
            Rule(reply="an answer from the context"),
        ]
    )
    view = SessionView(s, compute_facts(s))
    model = ModelConfig(backend="openai", model="m", base_url=srv.url, max_retries=0, cache="off")
    view.extras["ctx"] = ScoreContext("", model)
    got = {
        v.metric: (v.value, v.error) for v in judge(ProbeInput(event(s, 11, 10, FULL), view), replicates=2)
    }

    assert got["judge_overall"] == (4.0, None)  # the three graded questions; the refused one is left out
    assert "judge_decision" not in got and got["judge_recall"][0] == 4.0
    per_q = {m: v for m, v in got.items() if m.startswith("judge_q:")}  # and kept as its error row
    assert len(per_q) == 4 and per_q.pop(f"judge_q:{refused['id']}")[1].startswith(
        "RuntimeError: answer call"
    )
    assert set(per_q.values()) == {(4.0, None)}
    assert sorted(j["kind"] for j in view.extras["judgements"]) == ["artifact", "continuation", "recall"]
    log = [e for e in read_log(srv.log_path) if e.get("key")]
    answers = [e["ts"] for e in log if e["purpose"] == "answer"]
    judges = [e["ts"] for e in log if e["purpose"] == "judge"]
    assert (len(answers), len(judges)) == (4 * 2, 3 * 2)  # 4 questions x 2 replicates; 3 judged
    assert max(answers) < min(judges)


def test_bank_exam_grades_with_the_model_and_keeps_a_failed_question_as_its_error_row():
    """The probe-bank exam's model path (scripted answers and grades through make_client): the
    question whose answer states the tally is graded 1.0, the other 0.2, and a question whose
    answer call fails is an error row of its own, never a zero."""
    from evalkit.score.banks import bank

    s = judge_session()
    qs = [
        {
            "id": f"b/{i}",
            "kind": k,
            "text": t,
            "expected": ["x"],
            "tally": None,
            "source": 0,
            "until": None,
            "cues": [],
        }
        for i, (k, t) in enumerate(
            [("recall", "What was the last test run?"), ("artifact", "Which file?"), ("decision", "FAIL me")]
        )
    ]
    view = SessionView(s, compute_facts(s))
    view.extras["ctx"] = ScoreContext("", ModelConfig(backend="scripted-judge", model="m"), {s.id: qs})
    CALLS.clear()
    got = {v.metric: (v.value, v.error) for v in bank(ProbeInput(event(s, 11, 10, FULL), view))}
    # a bank question's row names the point it was asked at (message 11): arms pair on it
    assert got["exam_q:b/0@11"] == (1.0, None) and got["exam_q:b/1@11"] == (pytest.approx(0.2), None)
    assert (
        got["exam_q:b/2@11"][0] is None and "answer call failed: scripted failure" in got["exam_q:b/2@11"][1]
    )
    assert got["exam"] == (pytest.approx(0.6), None)
    assert CALLS.count("answer") == 3 and CALLS.count("judge") == 2


def _half_broken_judge(settings):
    """A judge backend whose first replicate's verdict is a failed call and second unparseable."""

    def call(req):
        if req.purpose == "answer":
            return ChatResponse("an answer", "scripted", req.model)
        if req.replicate == 0:
            return ChatResponse(None, "scripted", req.model, error="scripted judge failure")
        return ChatResponse("no grades here", "scripted", req.model)

    return call


if "half-broken-judge" not in BACKENDS:
    BACKENDS.add("half-broken-judge", _half_broken_judge, "test backend: a failed, an unparseable verdict")


def test_an_unparseable_verdict_stays_cached_and_the_question_is_an_error(tmp_path):
    """The unparseable verdict of replicate 1 stays in the call cache (an unchanged rerun reads it
    again instead of paying twice, issue 39) while the failed call of replicate 0 is never cached;
    the question is an error with the first failure's reason."""
    from evalkit.score.base import model_client as _client
    from evalkit.score.judge_model import judge_request, model_grades

    s = judge_session()
    view = SessionView(s, compute_facts(s))
    model = ModelConfig(backend="half-broken-judge", model="m", cache_path=str(tmp_path / "calls.sqlite"))
    view.extras["ctx"] = ScoreContext("", model)
    inp = ProbeInput(event(s, 11, 10, FULL), view)
    q = select_questions(inp, per_kind=1)[0]
    (got,) = model_grades([q], inp, model, replicates=2)
    assert isinstance(got, RuntimeError) and "scripted judge failure" in str(got)
    client = _client(inp)
    unparseable = judge_request(q, "an answer", "m", 1)
    assert client.cache.get(client.key(unparseable)).text == "no grades here"
    failed_call = judge_request(q, "an answer", "m", 0)
    assert client.cache.get(client.key(failed_call)) is None  # a failed call is never cached


@pytest.mark.slow
def test_scoring_with_a_real_model_in_two_workers_matches_one_and_sends_each_call_once(
    tmp_path, fake_server_process
):
    """Scoring with a real model runs in worker processes, as the replay does: two workers give the
    table one worker gives, and each answer and judge call reaches the server once (the workers
    share the run's call cache); the client's ledger names the process of each call."""
    import shutil

    import pandas as pd

    from evalkit.models.usage import read_ledger
    from evalkit.score.stage import score_run
    from evalkit.testing.serverlog import answered, read_log

    url, log = fake_server_process("--no-bodies", "--latency", "0.05")
    cfg = tmp_path / "exp.toml"
    cfg.write_text(
        'name = "sw"\nseed = 7\n[corpus]\nkind = "synth"\nsessions = 2\n'
        '[replay]\narms = ["baseline", "head-tail"]\n[continuation]\nenabled = false\n'
    )
    assert main(["run", "--config", str(cfg), "--run-dir", str(tmp_path / "offline")]) == 0
    tables, calls, procs = {}, {}, {}
    for workers in (2, 1):
        run = tmp_path / f"w{workers}"
        shutil.copytree(tmp_path / "offline", run)
        (run / "metrics.parquet").unlink()
        conf = json.loads((run / "config.json").read_text())
        conf["config"]["model"] = {
            "backend": "openai",
            "model": "fake-model",
            "base_url": url,
            "max_retries": 2,
        }
        (run / "config.json").write_text(json.dumps(conf))
        before = len(read_log(log))
        score_run(run, suite=find_suite("probes/default.toml", ROOT), run_id="sw", workers=workers)
        sent = [
            e for e in answered(read_log(log)[before:]) if e["purpose"] in ("answer", "judge")
        ]
        keys = [e["key"] for e in sent]
        assert keys and len(keys) == len(set(keys)), (workers, len(keys), len(set(keys)))
        calls[workers] = sorted(keys)
        procs[workers] = {x["pid"] for x in read_ledger(run) if x["outcome"] == "sent"}
        tables[workers] = pd.read_parquet(run / "metrics.parquet")
    assert calls[2] == calls[1]
    assert (len(procs[2]), len(procs[1])) == (2, 1)  # each of two sessions in its own process
    pd.testing.assert_frame_equal(tables[2], tables[1])
    assert tables[2]["metric"].eq("judge_overall").any()


def test_suite_files_validate_names_and_parameters(tmp_path):
    default = load_suite(ROOT / "probes" / "default.toml")
    assert "judge" in default.names() and "tally_present" in default.names() and len(default.names()) == 17
    with pytest.raises(SuiteError, match=r"probes\.nope: unknown probe"):
        suite_from_dict({"probes": ["nope"]}, "x.toml")
    with pytest.raises(SuiteError, match=r"x\.toml: probes\.tally_present\.bogus: unknown parameter"):
        suite_from_dict({"probes": {"tally_present": {"bogus": 1}}}, "x.toml")
    with pytest.raises(SuiteError, match="expected int"):
        suite_from_dict({"probes": {"tally_present": {"long_chars": "2000"}}}, "x.toml")
    with pytest.raises(SuiteError, match="no such suite"):
        find_suite(tmp_path / "missing.toml")


@pytest.mark.slow
def test_score_cli_rescores_with_a_suite_and_prints_the_table(tmp_path, capsys):
    cfg = tmp_path / "exp.toml"
    cfg.write_text(
        'name = "tiny"\n[corpus]\nsessions = 3\nsession_tokens = 400000\n'
        '[replay]\nworkers = 2\narms = ["baseline", "head-tail", "validate"]\n'
    )
    run = tmp_path / "run"
    assert main(["run", "--config", str(cfg), "--run-dir", str(run)]) == 0
    first = (run / "metrics.parquet").read_bytes()
    questions = (run / "corpus" / "questions.jsonl").read_text()
    assert questions.count("\n") == 3
    suite = tmp_path / "s.toml"
    suite.write_text('name = "two"\n[probes.tally_present]\nlong_chars = 2000\n[probes.growth]\n')
    capsys.readouterr()
    assert main(["score", str(run), "--suite", str(suite), "--table"]) == 0
    out = capsys.readouterr().out
    assert "suite two: tally_present, growth" in out and "| baseline |" in out
    import pandas as pd

    from evalkit.continuation.metrics import is_continuation_metric

    m = pd.read_parquet(run / "metrics.parquet")
    assert m.metric.map(is_continuation_metric).any()  # continuation rows survive a re-score
    m = m[~m.metric.map(is_continuation_metric)]
    assert set(m.metric) <= {
        "tally_present",
        "tally_in_summary",
        "tally_present_left_view",
        "tally_left_view_early",
        "summary_growth",
        "stacked",
        "growth",
    }
    assert (m[m.metric == "growth"][["event", "round"]] == -1).all().all()
    assert main(["score", str(run)]) == 0  # back to the run's suite: same bytes as the run wrote
    assert (run / "metrics.parquet").read_bytes() == first
    assert (run / "corpus" / "questions.jsonl").read_text() == questions
