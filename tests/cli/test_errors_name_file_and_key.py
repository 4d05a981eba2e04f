"""Item 9 of issue 19: usage and data errors are one line naming the file (and key or line),
exit 2, before a run does any work."""

from __future__ import annotations

import pytest

from evalkit.cli import main
from tests.support.cli import run_cli
from tests.support.runs import tiny_corpus, write_experiment


def _error_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if "error" in ln.lower() or "Traceback" in ln]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return tiny_corpus(tmp_path_factory.mktemp("corpus"), n=2)


CONFIG_CASES = {
    "typo in a section": ({"replay": {"windw": 1000}}, "replay.windw"),
    "negative window": ({"replay": {"window": -5}}, "replay.window"),
    "window is a word": ({"replay": {"window": "big"}}, "replay.window"),
    "keep_recent past the threshold": ({"replay": {"keep_recent": 40_000}}, "replay.keep_recent"),
    "empty arm list": ({"replay": {"arms": []}}, "replay.arms"),
    "typo in model": ({"model": {"temprature": 0.2}}, "model.temprature"),
    "negative replicates": ({"model": {"replicates": 0}}, "model.replicates"),
    "typo in continuation.model": (
        {"continuation": {"model": {"bakend": "openai"}}},
        "continuation.model.bakend",
    ),
}


@pytest.mark.parametrize("case", sorted(CONFIG_CASES))
def test_bad_config_values_are_one_line_exit_2_naming_file_and_key(tmp_path, corpus, capsys, case):
    sections, key = CONFIG_CASES[case]
    model = sections.pop("model", None)
    exp = write_experiment(tmp_path / "exp.toml", corpus, model=model, **sections)
    run = tmp_path / "run"
    assert main(["run", "--config", str(exp), "--run-dir", str(run)]) == 2
    err = _error_lines(capsys.readouterr().err)
    assert len(err) == 1 and str(exp) in err[0] and key in err[0], err
    assert not run.exists()


def test_sessions_zero_is_refused(tmp_path, capsys):
    exp = write_experiment(tmp_path / "exp.toml", None)
    assert main(["run", "--config", str(exp), "--run-dir", str(tmp_path / "r"), "--sessions", "0"]) == 2
    err = _error_lines(capsys.readouterr().err)
    assert len(err) == 1 and "corpus.sessions" in err[0]


def test_replay_cache_miss_is_one_line(tmp_path, corpus, capsys):
    model = {"backend": "replay", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    exp = write_experiment(tmp_path / "exp.toml", corpus, model=model)
    assert main(["run", "--config", str(exp), "--run-dir", str(tmp_path / "run")]) == 2
    err = _error_lines(capsys.readouterr().err)
    assert len(err) == 1 and "no cached answer" in err[0] and "model-calls.sqlite" in err[0], err


def test_corrupt_cache_file_is_one_line_naming_it(tmp_path, corpus, capsys):
    cache = tmp_path / "calls.sqlite"
    cache.write_bytes(b"this is not a database" * 100)
    model = {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1", "cache_path": str(cache)}
    exp = write_experiment(tmp_path / "exp.toml", corpus, model=model)
    assert main(["run", "--config", str(exp), "--run-dir", str(tmp_path / "run")]) == 2
    err = _error_lines(capsys.readouterr().err)
    assert len(err) == 1 and str(cache) in err[0], err


def test_import_out_pointing_at_a_file(tmp_path, capsys):
    out = tmp_path / "a-file"
    out.write_text("x")
    assert main(["import", "auto", str(tmp_path), "--out", str(out)]) == 2
    err = _error_lines(capsys.readouterr().err)
    assert len(err) == 1 and str(out) in err[0], err


def test_duplicate_session_ids_are_refused_by_validate_and_run(tmp_path, corpus):
    dup = tmp_path / "dup.jsonl"
    line = corpus.read_text().splitlines()[0]
    dup.write_text(line + "\n" + line + "\n")
    done = run_cli("validate", str(dup))
    assert done.returncode == 2 and str(dup) in done.stderr and "lines 1, 2" in done.stderr, done.stderr
    exp = write_experiment(tmp_path / "exp.toml", dup)
    done = run_cli("run", "--config", str(exp), "--run-dir", str(tmp_path / "run"))
    assert done.returncode == 2, done.stderr
    err = _error_lines(done.stderr)
    assert len(err) == 1 and str(dup) in err[0] and "Traceback" not in done.stderr, done.stderr


def _claude_code_file(path, first_line_chars: int) -> None:
    import json

    entries = [
        {
            "type": "user",
            "sessionId": "s1",
            "uuid": "u1",
            "timestamp": "2026-01-01T00:00:00Z",
            "message": {"role": "user", "content": "fix the tests please " + "x" * first_line_chars},
        },
        {
            "type": "assistant",
            "sessionId": "s1",
            "uuid": "u2",
            "parentUuid": "u1",
            "timestamp": "2026-01-01T00:00:01Z",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "on it"}]},
        },
    ]
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\n")


def test_a_symlink_loop_is_imported_once_and_a_long_first_line_is_detected(tmp_path, capsys):
    src = tmp_path / "projects"
    src.mkdir()
    _claude_code_file(src / "s1.jsonl", 70_000)  # first line past the 64 KiB detection head
    (src / "loop").symlink_to(src)  # a folder linking to itself
    out = tmp_path / "out"
    assert main(["import", "auto", str(src), "--out", str(out)]) == 0, capsys.readouterr().err
    assert (out / "sessions.jsonl").read_text().count("\n") == 1
