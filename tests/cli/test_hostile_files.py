"""Hostile files and CLI misuse (issue 41 items 2, 4, 5, 10, 11, 12, 13, 15, 16, 19, 20, 21, 22,
24, 25; issue 39 item 6; issue 34 item 7).

Each case runs ``evalkit`` on files in a temporary folder: in-process (tests/support/cli.py), or
as a real ``python -m evalkit`` process where only a process shows it (signals, a closed pipe).
Whatever the input: no traceback, a refusal is one line naming the file or setting with exit 2,
and nothing already computed is lost or created where it should not be."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.cli import run_cli
from tests.support.runs import (
    copy_run,
    evalkit_cmd,
    files_under,
    refused,
    tiny_corpus,
    write_experiment,
)

# Every case starts evalkit processes, most on a whole (tiny) run: none belongs in a fast lane.
pytestmark = pytest.mark.slow


def no_traceback(done: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]


@pytest.fixture
def base_run(shared_tiny_run) -> Path:
    """One finished tiny offline run (2 sessions, 2 arms, continuation on), copied by the tests
    that damage it."""
    return shared_tiny_run


# --------------------------------------------------------------------------- verbs on a non-run folder
# Issue 41 item 10 and issue 34 item 7: a missing, empty-named, empty or foreign folder.

FOLDER_KINDS = ["missing", "empty-name", "empty", "foreign"]


def make_folder(tmp_path: Path, kind: str) -> str:
    if kind == "missing":
        return str(tmp_path / "no-such-run")
    if kind == "empty-name":
        return ""
    d = tmp_path / kind
    d.mkdir()
    if kind == "foreign":
        (d / "notes.txt").write_text("not a run\n")
        (d / "data.json").write_text('{"a": 1}\n')
    return str(d)


def verb_argv(verb: str, folder: str, tmp_path: Path, good: Path) -> list[str]:
    out = str(tmp_path / "out-created")
    return {
        "report": ["report", folder, "--out", out],
        "report-default-out": ["report", folder],
        "gate": ["gate", folder, "--out", out],
        "compare": ["compare", str(good), folder, "--out", out + ".md"],
        "calibrate": ["calibrate", folder, "--experiments", "4", "--out", out + ".md"],
        "merge": ["merge", folder, "--out", out],
    }[verb]


# Every kind for `report`, two kinds each for the other verbs (each case is a process: ~3 s).
VERB_CASES = [("report", k) for k in FOLDER_KINDS] + [
    ("report-default-out", "missing"),
    ("report-default-out", "empty"),
    ("gate", "empty-name"),
    ("gate", "foreign"),
    ("compare", "empty-name"),
    ("compare", "foreign"),
    ("calibrate", "empty-name"),
    ("calibrate", "empty"),
    ("merge", "empty-name"),
    ("merge", "foreign"),
]


@pytest.mark.parametrize("verb,kind", VERB_CASES)
def test_verbs_on_a_folder_no_run_wrote_exit_2_and_create_nothing(tmp_path, base_run, verb, kind):
    folder = make_folder(tmp_path, kind)
    work = tmp_path / "cwd"
    work.mkdir()
    before = sorted(map(str, tmp_path.rglob("*")))
    done = run_cli(*verb_argv(verb, folder, tmp_path, base_run), cwd=work)
    line = refused(done)
    assert (folder or "''") in line, line
    assert sorted(map(str, tmp_path.rglob("*"))) == before  # nothing created, not even --out


# --------------------------------------------------------------------------- report --out and figures


def test_report_out_keeps_the_users_own_figures(tmp_path, base_run):
    run = copy_run(base_run, tmp_path)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "fig-holiday.png").write_bytes(b"\x89PNG user photo")
    done = run_cli("report", str(run), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert (out / "fig-holiday.png").read_bytes() == b"\x89PNG user photo"
    drawn = {p.name for p in out.glob("fig-*.png")} - {"fig-holiday.png"}
    assert drawn, "the report drew no figure: nothing exercised"
    # A second report into the same folder replaces its own figures, not the user's.
    done = run_cli("report", str(run), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert (out / "fig-holiday.png").exists() and drawn <= {p.name for p in out.glob("fig-*.png")}


def test_report_calibrate_hint_quotes_the_run_path(tmp_path, base_run):
    """Item 21: the hint is meant to be pasted into a shell."""
    run = copy_run(base_run, tmp_path, "my run; rm -rf x")
    done = run_cli("report", str(run))
    assert done.returncode == 0, done.stderr
    md = (run / "report" / "report.md").read_text()
    assert f"evalkit calibrate '{run}'" in md


# --------------------------------------------------------------------------- wrong-shape run files (item 12)

DAMAGE = {
    "list": b"[]\n",
    "garbage": b"\x00\xff\xfe not json\n",
    "deep": b"[" * 100_000 + b"]" * 100_000,
}


VERBS = {
    "config.json": ["report", "gate", "compare", "calibrate", "resume"],
    "decision.json": ["report", "compare"],
    "config-field": ["report", "gate", "compare", "calibrate"],
    "verdicts-field": ["report", "compare"],
    # read for the report's first screen: unreadable must not read as "no warnings, offline"
    "warnings.json": ["report"],
}
SHAPE_CASES = [(f, d) for f in ("config.json", "decision.json", "warnings.json") for d in sorted(DAMAGE)] + [
    ("config-field", "list"),
    ("verdicts-field", "list"),
]


@pytest.mark.parametrize("file,damage", SHAPE_CASES)
def test_wrong_shape_run_files_are_one_line_naming_the_file(tmp_path, base_run, file, damage):
    verbs = VERBS[file]
    run = copy_run(base_run, tmp_path)
    if file == "config-field":
        body = json.loads((run / "config.json").read_text())
        (run / "config.json").write_text(json.dumps({**body, "config": ["not", "a", "table"]}))
        name = "config.json"
    elif file == "verdicts-field":
        body = json.loads((run / "decision.json").read_text())
        (run / "decision.json").write_text(json.dumps({**body, "verdicts": [1, 2]}))
        name = "decision.json"
    else:
        (run / file).write_bytes(DAMAGE[damage])
        name = file
    exp = base_run.parent / "exp.toml"
    for verb in verbs:
        argv = {
            "report": ["report", str(run), "--out", str(tmp_path / "rep")],
            "gate": ["gate", str(run), "--out", str(tmp_path / "gate")],
            "compare": ["compare", str(base_run), str(run)],
            "calibrate": ["calibrate", str(run), "--experiments", "4", "--workers", "1"],
            "resume": ["run", "--config", str(exp), "--run-dir", str(run), "--resume"],
        }[verb]
        done = run_cli(*argv, cwd=tmp_path)
        refused(done, str(run / name))
        assert not (tmp_path / "rep").exists()


@pytest.mark.parametrize("damage", ["list", "garbage", "fields"])
def test_a_damaged_completion_marker_reruns_its_stage(tmp_path, base_run, damage):
    run = copy_run(base_run, tmp_path)
    marker = run / ".done" / "score.json"
    body = {"list": b"[]", "garbage": b"\x00\xff garbage", "fields": b'{"inputs": [], "outputs": 3}'}[damage]
    marker.write_bytes(body)
    exp = base_run.parent / "exp.toml"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run), "--resume")
    assert done.returncode == 0, done.stderr
    no_traceback(done)
    assert "resume: score runs again" in done.stderr and str(marker) in done.stderr
    assert json.loads(marker.read_text())["stage"] == "score"


# --------------------------------------------------------------------------- redaction (item 4, #39.6)

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
PLANTED = {
    "aws_secret_ini": f"aws_secret_access_key = {AWS_SECRET}",
    "aws_secret_env": f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET.replace('EXAMPLE', 'EXAMPLF')}",
    "pem_cut": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAplantedPEMBODYqqqq\nZZ9plantedPEMline2",
    "url_slash": "https://deploy:pl/anted@pw@git.example.com/repo.git",
    "basic": "Authorization: Basic ZGVwbG95OnBsYW50ZWRiYXNpYw==",
    "gitlab": "token glpat-plantedGITLAB0123456789ab",
    "npm": "//registry.npmjs.org/:_authToken=npm_plantedNPM0123456789abcdefghijklmnopq",
    "slack_hook": "https://hooks.slack.com/services/T0PLANTED/B0PLANTED/plantedSLACKhook0123",
    "after_word": "KEY_sk-plantedUNDERSCORE0123456789abcd",
    "after_ansi": "\x1b[31msk-plantedANSI0123456789abcdefgh\x1b[0m",
}
# What must not survive of each (the distinctive part of the secret).
LEAK = {
    "aws_secret_ini": AWS_SECRET,
    "aws_secret_env": "EXAMPLFKEY",
    "pem_cut": "plantedPEM",
    "url_slash": "pl/anted@pw",
    "basic": "ZGVwbG95OnBsYW50ZWRiYXNpYw",
    "gitlab": "plantedGITLAB",
    "npm": "plantedNPM",
    "slack_hook": "plantedSLACKhook",
    "after_word": "plantedUNDERSCORE",
    "after_ansi": "plantedANSI",
}
DICT_KEY_SECRET = "sk-proj-plantedDICTKEY0123456789abcdef"
ID_SECRET = "ghp_plantedSESSIONID0123456789abcdefghijkl"


def _openai_session(path: Path, texts: list[str]) -> None:
    msgs = [
        {"role": "user", "content": "please deploy; mail ana.lopez@example.org about /Users/analopez/app"}
    ]
    msgs.append(
        {
            "role": "assistant",
            "content": "running it",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "bash",
                        "arguments": json.dumps(
                            {"env": {DICT_KEY_SECRET: "prod"}, "cmd": "ls /home/analopez/x"}
                        ),
                    },
                }
            ],
        }
    )
    msgs.append({"role": "tool", "tool_call_id": "call_1", "content": "\n".join(texts)})
    msgs.append({"role": "assistant", "content": "done, cc Ana.Lopez@Example.org and /Users/bo/y"})
    path.write_text(
        json.dumps({"messages": msgs, "owner": "ana.lopez@example.org", "token_note": PLANTED["gitlab"]})
    )


def test_import_redact_covers_secrets_and_people(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    _openai_session(src / f"deploy-{ID_SECRET}.json", list(PLANTED.values()))
    out = tmp_path / "corpus"
    done = run_cli("import", "openai", str(src), "--out", str(out), "--redact")
    assert done.returncode == 0, done.stderr
    blob = (out / "sessions.jsonl").read_text() + (out / "manifest.json").read_text()
    for kind, leak in LEAK.items():
        assert leak not in blob, kind
    for leak in (DICT_KEY_SECRET, "plantedSESSIONID", "analopez", "ana.lopez", "Ana.Lopez", "/Users/bo/"):
        assert leak not in blob, leak
    # Stable placeholders: the same person is the same placeholder everywhere.
    s = json.loads((out / "sessions.jsonl").read_text().splitlines()[0])
    text = json.dumps(s)
    assert "/Users/user-1/app" in text and "/home/user-1/x" in text and "/Users/user-2/y" in text
    assert text.count("email-1@redacted.invalid") == 2  # the case of an address does not make a new one
    # Counts per kind, printed.
    kinds = (
        "home_user",
        "email",
        "aws_secret_key",
        "basic_auth",
        "gitlab_token",
        "npm_token",
        "url_credentials",
    )
    for kind in kinds:
        assert kind in done.stdout, (kind, done.stdout)


def test_report_excerpts_strip_controls_before_redacting(tmp_path, base_run):
    """A key split by NUL/BEL, or glued to an ANSI colour code or a word, never shows in a quote."""
    run = copy_run(base_run, tmp_path)
    key = "sk-plantedSPLIT0123456789abcdefghij"
    planted = [
        "split key: " + key[:10] + "\x00" + key[10:20] + "\x07" + key[20:],
        "coloured key: " + PLANTED["after_ansi"],
        "glued key: " + PLANTED["after_word"],
    ]
    p = run / "events" / "head-tail.jsonl"
    original = [json.loads(ln) for ln in p.read_text().splitlines()]
    # The evidence section quotes one line a session: the first carried text one arm kept and the
    # other did not. Each planted line is quoted in a report of its own.
    for line, label in zip(planted, ("split key", "coloured key", "glued key: KEY\\_"), strict=True):
        events = [{**e, "carried": [line, *(e.get("carried") or [])]} for e in original]
        p.write_text("".join(json.dumps(e) + "\n" for e in events))
        done = run_cli("report", str(run))
        assert done.returncode == 0, done.stderr
        md = (run / "report" / "report.md").read_text()
        assert f"{label}: \\[REDACTED" in md or f"{label}\\[REDACTED" in md, (label, "not quoted")
        for leak in ("plantedSPLIT", "plantedANSI", "plantedUNDERSCORE"):
            assert leak not in md, leak


# --------------------------------------------------------------------------- lone surrogate (item 5)


def test_a_lone_surrogate_does_not_kill_the_report(tmp_path):
    corpus = tiny_corpus(tmp_path / "src", n=2)
    lines = corpus.read_text().splitlines()
    s = json.loads(lines[0])
    s["id"] = s["id"] + "-cut\ud83d"
    for m in s["messages"]:
        for b in m["blocks"]:
            for f in ("text", "output"):
                if f in b and isinstance(b[f], str):
                    b[f] = "emoji cut here: \ud83d " + b[f]
    corpus.write_text(json.dumps(s) + "\n" + "\n".join(lines[1:]) + "\n")  # ensure_ascii: "\ud83d"
    exp = write_experiment(tmp_path / "exp.toml", corpus)
    run = tmp_path / "run"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run))
    assert done.returncode == 0, done.stderr
    md = (run / "report" / "report.md").read_text(encoding="utf-8")
    assert "\ufffd" in md
    assert not list(run.rglob("*.tmp"))
    again = run_cli("report", str(run))
    assert again.returncode == 0, again.stderr


# --------------------------------------------------------------------------- calibrate --out (item 20)


def test_calibrate_out_is_honoured_and_the_run_folder_untouched(tmp_path, base_run):
    run = copy_run(base_run, tmp_path)
    before = {p: p.read_bytes() for p in files_under(run)}
    out = tmp_path / "cal" / "calibration.md"
    out.parent.mkdir()
    done = run_cli("calibrate", str(run), "--experiments", "8", "--workers", "1", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert out.is_file() and out.with_suffix(".json").is_file()
    assert json.loads(out.with_suffix(".json").read_text())["experiments"] == 8
    assert {p: p.read_bytes() for p in files_under(run)} == before
    assert "\r" not in done.stderr and "it/s" not in done.stderr  # no progress bar on a pipe


# --------------------------------------------------------------------------- signals (items 13, 16)


def _slow_run(tmp_path: Path, fake_server_process) -> tuple[list[str], Path, Path, str]:
    """A run whose replay waits on a slow endpoint (1.5 s an answer) in 2 worker processes; the
    endpoint's request log and URL."""
    url, log = fake_server_process("--latency", "1.5", "--no-bodies")
    corpus = tiny_corpus(tmp_path / "src", n=2)
    model = {"backend": "openai", "model": "fake-model", "base_url": url, "timeout": 30.0}
    exp = write_experiment(tmp_path / "exp.toml", corpus, model=model, replay={"workers": 2})
    return ["run", "--config", str(exp), "--run-dir", str(tmp_path / "run")], tmp_path / "run", log, url


def _stop_in_replay(
    argv: list[str], sig: int, group: bool, env: dict, log: Path
) -> subprocess.CompletedProcess:
    """Start ``evalkit ARGV``, send ``sig`` once replay is under way (its first request reached the
    endpoint: to the whole process group, as a terminal's Ctrl-C does, when ``group``), and wait.
    A fixed sleep instead let a loaded machine's run finish before the signal."""
    p = subprocess.Popen(
        evalkit_cmd(*argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, **env},
    )
    err: list[str] = []
    for line in p.stderr:
        err.append(line)
        if line.startswith("[evalkit] corpus: ") and "messages" in line:
            break
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and p.poll() is None:
        if log.exists() and '"POST"' in log.read_text(encoding="utf-8", errors="replace"):
            break
        time.sleep(0.05)
    time.sleep(0.5)  # summaries in flight in the workers (each answer takes 1.5 s)
    os.killpg(p.pid, sig) if group else p.send_signal(sig)
    out, rest = p.communicate(timeout=120)
    return subprocess.CompletedProcess(p.args, p.returncode, out, "".join(err) + rest)


def test_ctrl_c_is_one_line_and_resume_finishes(tmp_path, fake_server_process):
    argv, run, log, url = _slow_run(tmp_path, fake_server_process)
    done = _stop_in_replay(argv, signal.SIGINT, group=True, env={}, log=log)
    assert done.returncode == 130, done.stderr
    no_traceback(done)
    lines = [ln for ln in done.stderr.splitlines() if not ln.startswith("[evalkit]")]
    assert lines == ["evalkit run: interrupted; run it again with --resume to continue"], done.stderr
    # The latency only had to keep replay busy until the signal: the resume (the whole run's
    # calls) is served on the same URL, so the same config, by a server without it.
    fake_server_process.stop(url)
    fake_server_process("--no-bodies", "--port", str(urlsplit(url).port))
    again = run_cli(*argv, "--resume")
    assert again.returncode == 0, again.stderr
    assert (run / "decision.json").is_file()


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_ctrl_c_during_calibrate_simulate_is_one_line_exit_130(tmp_path):
    """Issue 41 item 13 for ``calibrate --simulate``: Ctrl-C, pressed twice as an impatient user
    does (SIGINT to the whole process group, as a terminal sends it), once its workers simulate.
    Before: tracebacks from the workers waiting on the job queue and from the parent, and the
    command could hang; now one line, exit 130, and no worker left behind."""
    p = subprocess.Popen(
        evalkit_cmd(
            "calibrate", "--simulate", "--experiments", "100", "--resamples", "100", "--workers", "2"
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=tmp_path,
    )
    deadline = time.monotonic() + 60
    while len(_children(p.pid)) < 2 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.1)
    workers = _children(p.pid)
    assert len(workers) >= 2, "the simulation's workers never started"
    time.sleep(1)
    try:
        os.killpg(p.pid, signal.SIGINT)
        time.sleep(0.3)
        with contextlib.suppress(ProcessLookupError):  # already gone: what a quick exit looks like
            os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:  # hung: end it and every worker of its group
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
    assert p.returncode == 130, (p.returncode, err[-3000:])
    assert "Traceback" not in err + out, err[-3000:]
    assert [ln for ln in err.splitlines() if ln.strip()] == ["evalkit calibrate: interrupted"], err[-3000:]
    assert not [w for w in workers if Path(f"/proc/{w}").exists()], "a worker outlived the command"


def test_sigterm_leaves_no_partial_files(tmp_path, fake_server_process):
    argv, run, log, _ = _slow_run(tmp_path, fake_server_process)
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    done = _stop_in_replay(argv, signal.SIGTERM, group=False, env={"TMPDIR": str(tmpdir)}, log=log)
    assert done.returncode == 143, done.stderr
    no_traceback(done)
    assert [ln for ln in done.stderr.splitlines() if not ln.startswith("[evalkit]")] == [
        "evalkit run: terminated (SIGTERM); run it again with --resume to continue"
    ]
    assert not list(run.rglob("*.tmp")) and not list(tmpdir.iterdir())
    assert (run / ".lock").read_text() == ""  # the run lock released


# --------------------------------------------------------------------------- closed pipe (item 22)


def test_a_closed_pipe_ends_quietly(tmp_path, base_run):
    """`evalkit … | head`: no 'Broken pipe' error; the exit is 141 (SIGPIPE), never 0 for a gate."""
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the first byte
    p = subprocess.run(
        evalkit_cmd("compare", str(base_run), str(base_run)),
        stdout=w,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    os.close(w)
    assert p.returncode == 141, p.stderr
    assert p.stderr == "", p.stderr


# --------------------------------------------------------------------------- large and bad records (item 2)


def _with_big_session(corpus: Path, mib: int = 9) -> str:
    """Grow the corpus's second session past ``mib`` MiB (one long tool output); its id."""
    lines = corpus.read_text().splitlines()
    s = json.loads(lines[1])
    result = next(b for m in reversed(s["messages"]) for b in m["blocks"] if b["type"] == "tool_result")
    result["output"] += "\n" + ("x" * 99 + "\n") * (mib * 1024 * 1024 // 100)
    lines[1] = json.dumps(s)
    assert len(lines[1]) > 8 * 1024 * 1024
    corpus.write_text("\n".join(lines) + "\n")
    return s["id"]


def test_large_sessions_are_read_and_bad_ones_named(tmp_path):
    corpus = tiny_corpus(tmp_path / "src", n=2)
    big = _with_big_session(corpus)
    with open(corpus, "ab") as fh:
        fh.write(b'{"id": "bad-\xff-bytes"}\n')
        fh.write(b'{"id": "cut", "messages": [\n')
    exp = write_experiment(tmp_path / "exp.toml", corpus)
    run = tmp_path / "run"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run))
    assert done.returncode == 0, done.stderr
    manifest = json.loads((run / "corpus" / "manifest.json").read_text())
    assert big in {r["id"] for r in manifest["sessions"]} and manifest["stats"]["sessions"] == 2
    skipped = manifest["skipped"]
    assert [(s["file"], s["line"]) for s in skipped] == [(str(corpus), 3), (str(corpus), 4)]
    assert "UTF-8" in skipped[0]["reason"] and "JSON" in skipped[1]["reason"]
    for s in skipped:  # named on stderr, with the line
        assert f"{corpus}:{s['line']}:" in done.stderr
    assert "skipped 2" in done.stderr


def test_a_corpus_whose_every_session_is_skipped_is_exit_2(tmp_path):
    corpus = tmp_path / "bad.jsonl"
    corpus.write_bytes(b'{"id": "bad-\xff"}\n{"not": "a session"}\n')
    exp = write_experiment(tmp_path / "exp.toml", corpus)
    done = run_cli("run", "--config", str(exp), "--run-dir", str(tmp_path / "run"))
    line = refused(done, str(corpus), "no session")
    assert "all 2 records were skipped" in line
    assert not (tmp_path / "run" / "metrics.parquet").exists()


# --------------------------------------------------------------------------- deep nesting (item 15)

DEEP = b"[" * 5000 + b"]" * 5000


def test_deeply_nested_json_is_a_file_line_error(tmp_path):
    corpus = tiny_corpus(tmp_path / "src", n=2)
    with open(corpus, "ab") as fh:
        fh.write(b'{"id": "deep", "messages": ' + DEEP + b"}\n")
    done = run_cli("validate", str(corpus))
    refused(done, f"{corpus}:3:", "nested")
    exp = write_experiment(tmp_path / "exp.toml", corpus)
    exp.write_text(exp.read_text().replace("[corpus]\n", '[corpus]\non_error = "raise"\n'))
    done = run_cli("run", "--config", str(exp), "--run-dir", str(tmp_path / "run"))
    refused(done, f"{corpus}:3:", "nested")


@pytest.mark.parametrize("depth", [600, 5000])
def test_import_drops_only_the_deep_record(tmp_path, depth):
    """Nested past the parser's limit, or parsed but too deep for every later walk (redaction)."""
    sid = "deep-session"

    def rec(i: int, role: str, content) -> str:
        return json.dumps(
            {
                "type": role,
                "sessionId": sid,
                "uuid": f"{role[0]}{i}",
                "parentUuid": None
                if i == 0 and role == "user"
                else (f"u{i}" if role == "assistant" else f"a{i - 1}"),
                "timestamp": f"2026-01-01T00:00:{i:02d}Z",
                "cwd": "/work",
                "message": {
                    "role": role,
                    "content": content,
                    **({"model": "m"} if role == "assistant" else {}),
                },
            }
        )

    lines = [rec(0, "user", "hello"), rec(0, "assistant", [{"type": "text", "text": "hi"}])]
    deep = rec(1, "user", "PLACEHOLDER").replace('"PLACEHOLDER"', "[" * depth + "]" * depth)
    lines += [deep, rec(2, "user", "still here"), rec(2, "assistant", [{"type": "text", "text": "ok"}])]
    src = tmp_path / "in" / "s.jsonl"
    src.parent.mkdir()
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "corpus"
    done = run_cli("import", "claude-code", str(src), "--out", str(out), "--redact")
    assert done.returncode == 0, done.stderr
    no_traceback(done)
    assert f"{src}:3:" in done.stderr and "nested" in done.stderr
    s = json.loads((out / "sessions.jsonl").read_text())
    texts = json.dumps(s)
    assert "still here" in texts and "hello" in texts


# --------------------------------------------------------------------------- resume after damage (item 11)


@pytest.mark.parametrize(
    "name",
    ["metrics.parquet", "corpus/questions.jsonl", "continuation/log.jsonl", "continuation/metrics.parquet"],
)
def test_resume_rebuilds_a_damaged_stage_file(tmp_path, base_run, name):
    import pandas as pd

    run = copy_run(base_run, tmp_path)
    target = run / name
    original = target.read_bytes()
    target.write_bytes(original[: len(original) // 2])  # a kill mid-write, a full disk
    exp = base_run.parent / "exp.toml"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run), "--resume")
    assert done.returncode == 0, done.stderr
    assert "resume: score runs again" in done.stderr, done.stderr
    if name.endswith(".parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(target), pd.read_parquet(base_run / name))
    else:
        assert target.read_bytes() == original
    again = run_cli("run", "--config", str(exp), "--run-dir", str(run), "--resume")
    assert "resume: score is complete, skipped" in again.stderr, again.stderr


# --------------------------------------------------------------------------- missing events file (item 19)


def test_a_missing_events_file_is_a_report_caveat(tmp_path, base_run):
    run = copy_run(base_run, tmp_path)
    (run / "events" / "head-tail.jsonl").unlink()
    done = run_cli("report", str(run))
    assert done.returncode == 0, done.stderr
    md = (run / "report" / "report.md").read_text()
    caveat = next(ln for ln in md.splitlines() if "**Missing from the run folder**" in ln)
    assert "events/head-tail.jsonl" in caveat and "`head-tail` arm" in caveat


# --------------------------------------------------------------------------- reused tool-call ids (item 25)


def test_tool_call_ids_reused_across_turns_are_kept_with_a_warning(tmp_path):
    msgs: list[dict] = [{"role": "user", "content": "go"}]
    for i in range(70):
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "bash", "arguments": f'{{"cmd": "echo {i}"}}'},
        }
        msgs += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": f"out {i}"},
        ]
    msgs.append({"role": "assistant", "content": "done"})
    src = tmp_path / "in" / "s.json"
    src.parent.mkdir()
    src.write_text(json.dumps({"messages": msgs}))
    out = tmp_path / "corpus"
    done = run_cli("import", "openai", str(src), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "69  tool call id reused across turns" in done.stdout, done.stdout
    assert "tool calls 70" in done.stdout  # every call kept
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["import"]["warnings"] == {"tool call id reused across turns": 69}
    checked = run_cli("validate", str(out))
    assert checked.returncode == 0 and "69 tool calls reuse an id of an earlier turn" in checked.stderr
    exp = write_experiment(tmp_path / "exp.toml", out / "sessions.jsonl")
    ran = run_cli("run", "--config", str(exp), "--run-dir", str(tmp_path / "run"))
    # the session is too short to compact at the test window: the run ends with nothing to judge
    assert ran.returncode == 1 and "nothing to judge" in ran.stderr, ran.stderr
    assert "1 sessions reuse tool-call ids across turns (69 calls)" in ran.stderr
    run_manifest = json.loads((tmp_path / "run" / "corpus" / "manifest.json").read_text())
    assert run_manifest["warnings"] == {"tool call id reused across turns": 69}


# --------------------------------------------------------------------------- messages (item 24)


@pytest.mark.parametrize(
    "case", ["dangling-run-dir", "report-out-under-a-file", "missing-warm-cache", "junk-warm-cache"]
)
def test_setting_errors_name_the_setting_before_any_stage(tmp_path, case):
    exp = write_experiment(tmp_path / "exp.toml", None)
    run = tmp_path / "run"
    argv = ["run", "--config", str(exp), "--run-dir", str(run)]
    if case == "dangling-run-dir":
        run.symlink_to(tmp_path / "gone")
        names = [str(run), "does not exist"]
    elif case == "report-out-under-a-file":
        (tmp_path / "afile").write_text("x")
        argv += ["--report-out", str(tmp_path / "afile" / "reports")]
        names = ["--report-out", str(tmp_path / "afile")]
    else:
        cache = tmp_path / "shared.sqlite"
        if case == "junk-warm-cache":
            cache.write_text("not a database")
        argv += ["--warm-cache", str(cache)]
        names = [str(cache)]
    done = run_cli(*argv)
    refused(done, *names)
    assert "[evalkit] corpus" not in done.stderr  # found before any stage
    assert not run.exists() or run.is_symlink()  # no run folder, no empty cache file in it


def test_report_out_is_not_created_when_the_report_fails(tmp_path):
    out = tmp_path / "D"
    done = run_cli("report", str(tmp_path / "no-run"), "--out", str(out))
    refused(done, str(tmp_path / "no-run"))
    assert not out.exists()


def test_a_cached_response_row_of_the_wrong_shape_names_the_cache(tmp_path, fake_server_process):
    """Item 12: a hand-edited or foreign cache row is one line naming the cache, not a traceback."""
    import sqlite3

    url, _ = fake_server_process("--no-bodies")
    corpus = tiny_corpus(tmp_path / "src", n=2)
    model = {"backend": "openai", "model": "fake-model", "base_url": url, "timeout": 30.0}
    exp = write_experiment(tmp_path / "exp.toml", corpus, model=model)
    run = tmp_path / "run"
    argv = ["run", "--config", str(exp), "--run-dir", str(run)]
    assert run_cli(*argv).returncode == 0
    cache = run / "model-calls.sqlite"
    for body in ("[1, 2]", "garbage"):
        with sqlite3.connect(cache) as con:
            con.execute("UPDATE calls SET response = ? WHERE purpose = 'summarize'", (body,))
        shutil.rmtree(run / "events")  # replay asks the cache again
        line = refused(run_cli(*argv, "--resume"), str(cache), "cached response")
        assert "unreadable" in line
