"""The in-process CLI helper (tests/support/cli.py) reports what a real process would: a crash is
a traceback on stderr and exit 1, output at the file-descriptor level is captured, and the test's
own working folder, environment and signal handlers come back unchanged."""

from __future__ import annotations

import os
import signal

from tests.support.cli import run_cli


def test_an_escaping_exception_is_a_traceback_and_exit_1(tmp_path, monkeypatch):
    import evalkit.corpus

    def boom(*a, **k):
        raise RuntimeError("planted crash")

    monkeypatch.setattr(evalkit.corpus, "read_sessions", boom)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("")
    done = run_cli("validate", str(corpus))
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "RuntimeError: planted crash" in done.stderr


def test_output_state_and_usage_errors_are_those_of_a_process(tmp_path):
    cwd, env, handlers = os.getcwd(), dict(os.environ), signal.getsignal(signal.SIGTERM)
    usage = run_cli("no-such-verb", cwd=tmp_path, env={"EVALKIT_PLANTED": "1"})
    assert usage.returncode == 2 and "invalid choice" in usage.stderr and usage.stdout == ""
    listed = run_cli("importers")
    assert listed.returncode == 0 and "claude-code" in listed.stdout
    assert (os.getcwd(), dict(os.environ), signal.getsignal(signal.SIGTERM)) == (cwd, env, handlers)
