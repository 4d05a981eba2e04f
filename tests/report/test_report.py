"""Reports end to end: a real run folder (real pipeline on a tiny corpus), candidate arms derived
from its events, decision.json written by the decide stage itself, and the report read back."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.image import imread

from evalkit.cli import main
from evalkit.contracts.metrics import question_family, read_metrics
from evalkit.contracts.metrics_stream import write_metrics
from evalkit.decide import decide, parse_rules
from evalkit.report import write_report
from evalkit.report.escape import escape_inline, excerpt, redact
from evalkit.report.sections import SECTIONS
from tests.support.report_lint import check_file, check_markdown

FAKE_KEY = "sk-proj-" + "Zx9" * 12
NASTY = [
    f"Never commit the key {FAKE_KEY} or run `rm -rf /` <script>alert(1)</script> here",
    "| secret | table | [click](http://evil.example) |",
    "Keep &amp; as typed; <img src=x onerror=alert(1)> is not markup",
]
# Every section but the bank questions', which a run without a bank leaves out.
SECTION_TITLES = [s.title for s in SECTIONS if s.title != "Bank questions"]


def _is_nasty(line: str) -> bool:
    return any(n in line for n in NASTY)


def _derive_arm(
    run: Path, name: str, compound: bool, dead_session: str | None, nasty_session: str = ""
) -> None:
    """events/<name>.jsonl from the baseline's. With ``compound`` each round re-embeds the previous
    summary and carries every text carried before (the seed-004 shape, which also keeps the quoted
    first user message to the end); otherwise the quoted lines are dropped."""
    out, prev_summary, prev_carried = [], {}, {}
    for raw in (run / "events/baseline.jsonl").read_text().splitlines():
        e = json.loads(raw)
        e["arm"] = name
        if compound:
            if e["session"] == nasty_session:
                e["carried"] = ["\n".join(NASTY), *e["carried"]]
            carried = prev_carried.get(e["session"], []) + [
                c for c in e["carried"] if c not in prev_carried.get(e["session"], [])
            ]
            e["carried"] = prev_carried[e["session"]] = carried
            e["summary"] = prev_summary.get(e["session"], "") + e["summary"]
            prev_summary[e["session"]] = e["summary"] + "\n"
            e["tokens_after"] += len(e["summary"]) // 4
        else:
            e["carried"] = ["\n".join(ln for ln in c.splitlines() if not _is_nasty(ln)) for c in e["carried"]]
            e["summary"] = "\n".join(ln for ln in e["summary"].splitlines() if not _is_nasty(ln))
        out.append(e)
    if dead_session:
        last = max((e for e in out if e["session"] == dead_session), key=lambda e: e["event"])
        last["tokens_after"] = last["window"] + 1
        last["invariants"]["over_limit"] = True
    (run / f"events/{name}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in out))


# Rules for the tiny run: 4 sessions, so α = 0.2 (the smallest exact sign-flip p-value is 2^-4,
# and Holm doubles it over the two success tests).
REPORT_RULES = {
    "alpha": 0.2,
    "min_sessions": 2,
    "resamples": 2000,
    "seed": 7,
    "metrics": {
        "tally_present": {"direction": "higher", "min_effect": 0.05, "margin": 0.02},
        "constraints_kept": {"direction": "higher", "min_effect": 0.05, "margin": 0.5},
    },
    "candidates": {
        "compound": {"success": ["tally_present"], "guardrails": ["constraints_kept"]},
        "lean": {"success": ["tally_present"], "guardrails": ["constraints_kept"]},
    },
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    assert main(["synth", "--sessions", "4", "--out", str(tmp / "src")]) == 0
    # The transcript to quote: a user message opens with HTML, Markdown table syntax, back-ticks
    # and a fake API key; the `compound` arm below carries it verbatim to the end (as a plugin
    # carry would) while the baseline does not, so the evidence section quotes it.
    lines = (tmp / "src/sessions.jsonl").read_text().splitlines()
    s = json.loads(lines[0])
    second_user = [m for m in s["messages"] if m["role"] == "user"][1]
    second_user["blocks"][0]["text"] = "\n".join(NASTY) + "\n" + second_user["blocks"][0]["text"]
    lines[0] = json.dumps(s)
    (tmp / "src/sessions.jsonl").write_text("\n".join(lines) + "\n")
    cfg = tmp / "exp.toml"
    cfg.write_text(
        f'name = "tiny"\n[corpus]\nkind = "path"\npath = "{tmp / "src/sessions.jsonl"}"\n[replay]\nworkers = 2\n'
    )
    run = tmp / "run"
    assert main(["run", "--config", str(cfg), "--run-dir", str(run)]) == 0
    nasty_session = s["id"]
    _derive_arm(run, "compound", compound=True, dead_session=nasty_session, nasty_session=nasty_session)
    _derive_arm(run, "lean", compound=False, dead_session=None)

    # Metrics for the derived arms: the compound arm loses constraints on the quoted session.
    df = read_metrics(run / "metrics.parquet")
    # The continuation rows are constructed below (errors and a known unanswerable share).
    df = df[
        ~df["metric"].isin(
            ["refail_30", "redo_30", "stops", "first_action_match", "calls_used", "unanswerable_share"]
        )
    ]
    base = df[df["arm"] == "baseline"]
    comp = base.assign(arm="compound")
    hit = (comp["session"] == nasty_session) & (comp["metric"] == "constraints_kept")
    comp.loc[hit, "value"] = 1.0 if comp.loc[hit, "value"].mean() < 0.5 else 0.0
    # compound loses 0.2 of tally_present in every session (a drop), lean gains 0.2 (a ship).
    comp.loc[comp["metric"] == "tally_present", "value"] -= 0.2
    lean = base.assign(arm="lean")
    lean.loc[lean["metric"] == "tally_present", "value"] += 0.2
    aa = base.assign(arm="aa")  # the A/A arm of a deterministic backend: the baseline exactly
    # Session-level continuation rows: a plain value, and an agent error (NaN + error, never a zero).
    extra = [
        {
            "run": "tiny",
            "arm": arm,
            "session": sess,
            "event": -1,
            "round": -1,
            "replicate": 0,
            "metric": metric,
            "value": value,
            "error": error,
        }
        for arm in ("baseline", "compound", "lean")
        for sess in base["session"].unique()
        for metric, value, error in (
            ("unanswerable_share", 0.25, None),
            ("refail_30", np.nan, "TimeoutError: agent call timed out"),
        )
    ]
    df = pd.concat([df, comp, lean, aa, pd.DataFrame(extra)], ignore_index=True)
    write_metrics(df, run / "metrics.parquet")

    # decision.json and model-calls.json in the shapes the code writes: the decide stage's own
    # output, and the keys of run.write_model_call_stats.
    table = read_metrics(run / "metrics.parquet")
    judged = table[table["arm"].isin(["baseline", "aa", "compound", "lean"])]
    rules = parse_rules(REPORT_RULES, "test_report rules")
    decision = decide(judged, rules, ["compound", "lean", "ghost"])
    (run / "decision.json").write_text(json.dumps(decision, indent=1))
    (run / "model-calls.json").write_text(
        json.dumps(
            {
                "calls": 12,
                "input_tokens": 34000,
                "output_tokens": 2100,
                "cost_usd": 0.0,
                "by_backend_model": [
                    {
                        "backend": "openai",
                        "model": "m",
                        "calls": 12,
                        "input_tokens": 34000,
                        "output_tokens": 2100,
                        "cost_usd": 0.0,
                    }
                ],
                "cache_file": str(run / "model-calls.sqlite"),
            }
        )
    )
    cfgj = json.loads((run / "config.json").read_text())
    cfgj["config"]["replay"]["arms"] = ["baseline", "compound", "lean"]
    (run / "config.json").write_text(json.dumps(cfgj))
    return run


@pytest.fixture(scope="module")
def report(run_dir, tmp_path_factory) -> Path:
    # Outside the run folder, as `evalkit run --report-out reports` writes it: links must still resolve.
    out = tmp_path_factory.mktemp("reports") / "tiny"
    assert main(["report", str(run_dir), "--out", str(out)]) == 0
    return out / "report.md"


@pytest.mark.slow
def test_every_section_in_order_with_its_content(run_dir, report):
    md = report.read_text()
    heads = [ln[3:] for ln in md.splitlines() if ln.startswith("## ")]
    assert heads == SECTION_TITLES
    sec = dict(zip(SECTION_TITLES, re.split(r"^## .*$", md, flags=re.M)[1:], strict=True))
    v = sec["Verdicts"]
    assert (
        "| `compound` | ❌ drop | `tally_present` | -0.200 [-0.200, -0.200] | 0.062 (worse than baseline) | 4 |"
        in v
    )
    # Holm over the two success tests doubles the exact 2^-4
    assert (
        "| `lean` | ✅ ship | `tally_present` | +0.200 [+0.200, +0.200] | 0.125 (Holm-adjusted, beyond" in v
    )
    assert "⏸ untested" in v
    f = sec["Run facts"]
    assert "offline stand-in, not a language model" in f and "12 calls; cache hits n/a" in f
    assert "in 34000, out 2100 tokens" in f and "2000 resamples" in f and "evalkit run --config" in f
    assert "| sessions / messages / size | 4 / " in f
    assert "fig-effects.png" in sec["Effects at a glance"]
    e = sec["Effects per metric"]
    assert (
        "| `tally_present` | success, ↑ | **-0.200** [-0.200, -0.200] | **+0.200** [+0.200, +0.200] | – |"
        in e
    )
    assert "| `constraints_kept` | guardrail, ↑ |" in e
    lean = json.loads((run_dir / "decision.json").read_text())["verdicts"]["lean"]["metrics"]["tally_present"]
    means = sec["Metric means"]
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in means.splitlines() if ln.startswith("| ")]
    cols = {name: k for k, name in enumerate(rows[0])}
    by_arm = {r[0]: r for r in rows[1:]}
    tally = cols["tally_present ↑"]
    assert by_arm["baseline"][tally] == f"{lean['baseline_mean']:.3f}"
    assert by_arm["lean"][tally] == f"{lean['candidate_mean']:.3f}"
    refail = cols["refail_30 ↓"]  # every value an error: no mean, never 0
    assert [by_arm[a][refail] for a in ("baseline", "compound", "lean", "aa")] == [
        *["n/a (4 of 4 err)"] * 3,
        "–",
    ]
    first = sec["Read these first"]
    assert "**`refail_30` failed on every value under " in first and "**Dead sessions**" in first
    c = sec["Compounding and size"]
    row = next(ln for ln in c.splitlines() if ln.startswith("| `compound` |"))
    growth = float(re.search(r"×([\d.]+)", row).group(1))
    assert growth >= 1.9 and row.endswith("| **1** |")  # re-embedded summaries, one dead session
    # arms with the same numbers share a row (`baseline` = `lean`): find lean's, wherever it is
    assert next(ln for ln in c.splitlines() if ln.startswith("| ") and "`lean`" in ln).endswith("| 0 |")
    ev = sec["Evidence per candidate"]
    assert "| `compound` | ❌ drop | `tally_present` | " in ev and "0.667 → 0.467 worse" in ev
    assert "evalkit view " in ev  # no viewer yet: the sessions are not links
    with_rules = sum(
        bool(json.loads(x)["constraints"]) for x in (run_dir / "corpus/facts.jsonl").read_text().splitlines()
    )
    assert with_rules > 0  # the A/A rows are exactly zero: one sentence instead of a table of zeros
    assert "Every listed A/A difference and interval is exactly zero (2 metrics)." in sec["Noise floor"]
    assert "**A/A arm (aa) equals the baseline exactly on every metric" in sec["Noise floor"]
    cav = sec["Caveats"]
    for needle in (
        "Offline stand-in",
        "Synthetic corpus",
        "Low n",
        "Metrics with errors",
        "refail_30",
        "Unanswerable continuation calls",
        "Proxy agent",
        "Untested candidates",
        "`ghost`",
    ):
        assert needle in cav, needle


def test_the_p_beside_each_verdict_is_the_deciding_tests(run_dir, report):
    """Every p printed in the verdict table is decision.json's ``deciding_p`` for that candidate,
    never the metric's other p-values (a drop printed p = 1.000, the superiority test's, beside a
    reason citing p < 0.001)."""
    from evalkit.report.markdown import pval

    verdicts = json.loads((run_dir / "decision.json").read_text())["verdicts"]
    md = report.read_text()
    table = md.split("## Verdicts")[1].split("\n## ")[0]
    rows = [ln for ln in table.splitlines() if ln.startswith("| `")]
    assert len(rows) == len(verdicts) == 3
    seen = set()
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        cand = cells[0].strip("`")
        v = verdicts[cand]
        printed = cells[4]
        if v["deciding_p"] is None:
            assert printed == "none", cand
        else:
            assert printed.split(" (")[0] == pval(v["deciding_p"]), (cand, printed, v["deciding_p"])
            m = v["metrics"][v["deciding_metric"]]
            # the test it names is the one the rule used: p_worse for a drop, Holm's p for a ship
            want = m["p_worse"] if v["verdict"] == "drop" else m["p_holm"]
            assert v["deciding_p"] == want and want != m["p_value"], cand
        seen.add(cand)
    assert seen == set(verdicts)
    # the first 40 lines hold the verdict table and the warnings
    head = "\n".join(md.splitlines()[:40])
    assert all(r in head for r in rows) and "## Read these first" in head and "**Dead sessions**" in head


def test_exam_questions_are_in_their_own_table_and_no_section_lists_them_as_metrics(run_dir, report):
    from evalkit.contracts import questions as question_table

    md = report.read_text()
    sec = dict(zip(SECTION_TITLES, re.split(r"^## .*$", md, flags=re.M)[1:], strict=True))
    names = set(read_metrics(run_dir / "metrics.parquet")["metric"])
    assert not [m for m in names if question_family(m) is not None]  # no metric name holds a question id
    asked = question_table.read(run_dir)
    assert {"identifier", "judge_offline"} <= set(asked["exam"])  # the default probes ask both exams
    ids = set(asked["question"])
    for title in ("Metric health", "Effects per metric", "Metric means", "Noise floor"):
        assert not any(q in sec[title] for q in ids), title
        assert "_q:" not in sec[title], title
    # the scorecard pairs them question by question, from the question table
    assert "identifier exam: W / L / T" in sec["Scorecard: exam score vs tokens kept"]


def test_figures_open_at_github_width_and_are_not_blank(report):
    md = report.read_text()
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert len(images) == 3  # the effects overview, the scorecard and the compounding figure
    for rel in images:
        img = imread(report.parent / rel)
        h, w = img.shape[:2]
        assert w == 900 and 200 <= h <= 1400, (rel, img.shape)
        rgb = img[..., :3]
        ink = (rgb < 0.9).any(axis=2).mean()  # share of pixels that are not (near) white
        assert 0.01 < ink < 0.6, (rel, ink)
        assert len(np.unique(rgb.reshape(-1, 3), axis=0)) > 20  # lines, text, markers, not a flat fill


def test_markdown_lint_finds_no_broken_tables_or_links(report):
    assert check_file(report) == []
    # The checker itself catches what it claims to.
    bad = "| a | b |\n|---|---|\n| 1 | 2 | 3 |\n\n![x](missing.png) [y](#nowhere) <script>\n"
    problems = check_markdown(bad, report.parent)
    assert len(problems) == 4 and "3 cells" in problems[0]


def test_transcript_text_is_escaped_and_redacted(report):
    md = report.read_text()
    ev = md.split("## Evidence per candidate")[1].split("## Scorecard")[0]
    # The compound arm carries the planted lines; the evidence quotes the first (the viewer test
    # shows every planted text as text).
    assert FAKE_KEY not in md and "[REDACTED:" in ev
    assert "<script>" not in md and "<img" not in md and "&lt;script&gt;" in ev
    assert "\\`rm -rf /\\`" in ev  # back-ticks cannot open a code span


def test_escape_and_redact_units():
    assert escape_inline("<b>x</b> & `y` | *z* [a](b)") == (
        "&lt;b&gt;x&lt;/b&gt; &amp; \\`y\\` \\| \\*z\\* \\[a\\](b)"
    )
    assert escape_inline("# h\n- item\n1. one") == "\\# h ⏎ - item ⏎ 1. one"
    assert escape_inline("- a") == "\\- a" and escape_inline("12) x") == "12\\) x"
    assert "@\u2060octocat" in escape_inline("ping @octocat")
    keys = {
        "openai": "sk-" + "a1" * 15,
        "github": "ghp_" + "B2" * 18,
        "aws": "AKIA" + "ABCDEFGHIJKLMNOP",
        "slack": "xoxb-" + "123456789012-abc",
        "bearer": "Authorization: Bearer " + "t0k3n" * 6,
        "pem": "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
    }
    for kind, secret in keys.items():
        out = redact(f"x {secret} y")
        assert "[REDACTED:" in out and secret.split()[-1][-12:] not in out, kind
    # Redaction happens before the cut, so a key at the edge is never half-shown.
    long = "a" * 150 + " " + FAKE_KEY
    assert "Zx9Zx9" not in excerpt(long, 160) and excerpt(long, 160).endswith("…")


def test_report_degrades_on_a_partial_run(run_dir, tmp_path):
    partial = tmp_path / "old"
    shutil.copytree(
        run_dir,
        partial,
        ignore=shutil.ignore_patterns("events", "report", "timings.json", "model-calls.json"),
    )
    (partial / "decision.json").write_text(json.dumps({"verdicts": {}}))
    path = write_report(partial, tmp_path / "out")
    md = path.read_text()
    assert [ln[3:] for ln in md.splitlines() if ln.startswith("## ")] == SECTION_TITLES
    assert "empty `verdicts` table" in md and "no `stats`" in md and "No compaction events" in md
    assert "`timings.json` (wall time per stage)" in md and "n/a (no model-call statistics" in md
    assert check_file(path) == []
    assert list((tmp_path / "out").glob("*.png")) == []


def test_compare_shows_changed_verdicts_and_effects(run_dir, tmp_path, capsys):
    other = tmp_path / "b"
    shutil.copytree(run_dir, other, ignore=shutil.ignore_patterns("events", "report"))
    d = json.loads((other / "decision.json").read_text())
    d["verdicts"]["lean"]["verdict"] = "inconclusive"
    d["verdicts"]["lean"]["metrics"]["tally_present"]["estimate"] = 0.05  # an edit of the code's own output
    (other / "decision.json").write_text(json.dumps(d))
    c = json.loads((other / "config.json").read_text())
    c["config"]["seed"] = 1
    (other / "config.json").write_text(json.dumps(c))
    out = tmp_path / "cmp.md"
    assert main(["compare", str(run_dir), str(other), "--out", str(out)]) == 0
    md = out.read_text()
    assert "**1 of 3 verdicts changed.**" in md
    assert "| `lean` | ✅ ship | ❔ inconclusive | **changed** |" in md
    assert (
        "| `lean` | `tally_present` | +0.200 [+0.200, +0.200] | +0.050 [+0.200, +0.200] | -0.150 | 4 → 4 |"
        in md
    )
    assert "| `seed` |" in md
    assert check_markdown(md, tmp_path) == []


def test_readme_load_run_example_runs(run_dir):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = re.search(r"## Reading a run from Python\n\n```python\n(.*?)```", readme, re.S).group(1)
    assert len(block.strip().splitlines()) == 5
    scope: dict = {}
    exec(block.replace('"runs/default-1a2b3c4d"', repr(str(run_dir))), scope)
    assert set(scope["m"]["arm"]) >= {"baseline", "compound", "lean"}
    assert len(scope["run"].events("baseline")) == len(scope["run"].events("compound")) > 0


def test_evidence_falls_back_to_the_first_metric_some_session_differs_on(tmp_path):
    """Without a deciding or success metric, the evidence shows the first metric (by name) with an
    error-free value under both arms on which some session differs; a metric the candidate has
    only error rows for is skipped, and with no difference anywhere the first shared metric is used."""
    from evalkit.contracts.records import CorpusManifest, Decision, RunConfig, Timings
    from evalkit.report.data import ReportData
    from evalkit.report.sections.evidence import _evidence_metric

    def data(rows) -> ReportData:
        metrics = pd.DataFrame(rows, columns=["arm", "metric", "session", "value", "error"])
        config = RunConfig(config={"replay": {"arms": ["baseline", "cand"]}})
        decision = Decision(verdicts={"cand": {"verdict": "inconclusive"}})
        events = pd.DataFrame(columns=["arm"])
        return ReportData(tmp_path, config, CorpusManifest(), decision, Timings(), None, events, metrics)

    rows = [
        *[(arm, "a", s, 1.0, None) for arm in ("baseline", "cand") for s in ("s1", "s2")],  # equal
        ("baseline", "b", "s1", 1.0, None),
        ("cand", "b", "s1", 0.0, "probe failed"),  # differs, but only through an error row
        *[(arm, "c", s, 1.0, None) for arm in ("baseline", "cand") for s in ("s1", "s2")],
        ("cand", "c", "s3", 0.5, None),  # s3 scored under the candidate only: differs
        ("baseline", "d", "s1", 0.0, None),
        ("cand", "d", "s1", 1.0, None),
    ]
    assert _evidence_metric(data(rows), "cand") == "c"
    same = [r for r in rows if r[1] == "a"]
    assert _evidence_metric(data(same), "cand") == "a"
