"""Item 1 of issue 19: no secret reaches disk. A key in the config is refused before anything is
written (any backend); credentials in a base_url and the key in the environment appear in no file
a run writes, nor in its output."""

from __future__ import annotations

import pandas as pd
import pytest

from evalkit.common.redact import redact_text
from tests.support.cli import run_cli
from tests.support.runs import files_under, tiny_corpus, write_experiment

KEY = "sk-planted-ENVKEY-0123456789abcdef"
URL_PASS = "planted-URLPASS-4242"
CFG_KEY = "sk-planted-CFGKEY-0123456789abcdef"


@pytest.mark.parametrize("backend", ["extractive", "openai"])
def test_api_key_in_config_is_refused_before_anything_is_written(tmp_path, backend):
    exp = write_experiment(
        tmp_path / "exp.toml",
        None,
        model={"backend": backend, "api_key": CFG_KEY, "base_url": "http://127.0.0.1:9/v1"},
    )
    run = tmp_path / "run"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "model.api_key" in lines[0] and str(exp) in lines[0], done.stderr
    assert CFG_KEY not in done.stderr + done.stdout
    assert not run.exists()  # nothing written, not even config.json


def test_url_password_pattern():
    s = "endpoint https://alice:s3cr3t-pass@example.com/v1 failed"
    out = redact_text(s)
    assert "s3cr3t-pass" not in out and "example.com/v1" in out and "[REDACTED:url_credentials]" in out


@pytest.mark.slow
def test_no_planted_secret_in_any_file_a_run_writes(tmp_path, fake_server_process):
    url, log = fake_server_process("--fault", "500=0.3", "--no-bodies")
    cred_url = url.replace("http://", f"http://evaluser:{URL_PASS}@")
    corpus = tiny_corpus(tmp_path / "corpus")
    model = {
        "backend": "openai",
        "model": "fake-model",
        "base_url": cred_url,
        "max_retries": 0,  # some summaries fail: their errors quote the endpoint
        "backoff_base": 0.01,
        "backoff_max": 0.02,
        "timeout": 10.0,
    }
    exp = write_experiment(tmp_path / "exp.toml", corpus, model=model)
    run = tmp_path / "run"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run), env={"OPENAI_API_KEY": KEY})
    assert done.returncode == 0, done.stderr
    rep = run_cli("report", str(run), "--out", str(tmp_path / "rep"), env={"OPENAI_API_KEY": KEY})
    assert rep.returncode == 0, rep.stderr
    written = files_under(run) + files_under(tmp_path / "rep") + [log]
    assert any(p.name == "config.json" for p in written) and any(p.suffix == ".sqlite" for p in written)
    errors = [
        ln for p in (run / "events").glob("*.jsonl") for ln in p.read_text().splitlines() if "HTTP 500" in ln
    ]
    # The port, hence every request key and fault draw, changes per run: the ~4 summaries all pass
    # about one run in four, so the judge's and answerer's failed calls (metric errors) count too.
    errors += [e for e in pd.read_parquet(run / "metrics.parquet")["error"].dropna() if "HTTP 500" in e]
    assert errors, "no call failed: the errors' text is not exercised"
    for p in written:
        blob = p.read_bytes()
        for secret in (KEY, URL_PASS, CFG_KEY):
            assert secret.encode() not in blob, f"{secret} written to {p}"
    for text in (done.stdout, done.stderr, rep.stdout, rep.stderr):
        assert KEY not in text and URL_PASS not in text
    assert "[REDACTED:url_credentials]" in (run / "config.json").read_text()
