"""Fuzz of every CLI verb's inputs (issue 19): config keys and values, corpora, metrics tables,
rules, caches and run folders. Whatever the input, ``main()`` returns 0, 1 or 2 without a
traceback, and a usage or data error (2) is one line naming the file (and line or key).

In-process (``evalkit.cli.main``) with a small, bounded number of examples so it stays fast; the
real-subprocess cases are in the other hardening tests."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalkit.cli import main
from tests.support.runs import tiny_corpus, toml_value, write_experiment

FUZZ = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,  # the same examples every run: a failure is reproducible
)

scalars = st.one_of(
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.booleans(),
    st.text(max_size=12),
)
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.dictionaries(st.text(min_size=1, max_size=6), scalars, max_size=2),
)
SECTION_KEYS = {
    "corpus": ["kind", "sessions", "path", "on_error", "sesions"],
    "replay": [
        "arms",
        "window",
        "reserve",
        "keep_recent",
        "trigger",
        "max_messages",
        "workers",
        "tokenizer",
        "windw",
    ],
    "model": [
        "backend",
        "model",
        "replicates",
        "cache",
        "concurrency",
        "timeout",
        "max_retries",
        "api_key",
        "modle",
    ],
    "score": ["suite", "suit"],
    "continuation": ["enabled", "agent", "max_calls", "model"],
    "rules": ["default", "x"],
}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzzbase")
    # Large enough to compact at the test window: a run where nothing compacts exits 1 (nothing to
    # judge), and a base with no events would leave the fuzzed folders' event files untried.
    corpus = tiny_corpus(root / "corpus", n=1, tokens=80_000)
    exp = write_experiment(root / "exp.toml", corpus, replay={"arms": ["baseline", "head-tail"]})
    run = root / "run"
    assert main(["run", "--config", str(exp), "--run-dir", str(run)]) == 0
    return root, corpus, run


def _check(code: int, err: str, files: list[Path]) -> None:
    assert code in (0, 1, 2), code
    assert "Traceback" not in err
    if code == 2:
        errors = [ln for ln in err.splitlines() if "error" in ln.lower() or ":" in ln]
        assert errors, f"exit 2 without a message: {err!r}"
        named = [ln for ln in errors if any(str(f) in ln or f.name in ln for f in files)]
        assert named, f"the error names none of {[str(f) for f in files]}: {err!r}"


@pytest.mark.slow
@FUZZ
@given(
    edits=st.lists(
        st.tuples(st.sampled_from(sorted(SECTION_KEYS)), st.data()),
        min_size=1,
        max_size=3,
    )
)
def test_fuzz_run_config(base, tmp_path, capsys, edits):
    _, corpus, _ = base
    cfg = {
        "corpus": {"kind": "path", "path": str(corpus)},
        "replay": {"workers": 1, "window": 40000, "reserve": 4000, "keep_recent": 5000},
        "score": {},
        "continuation": {"enabled": False},
        "model": {},
    }
    for section, data in edits:
        key = data.draw(st.sampled_from(SECTION_KEYS[section]))
        cfg.setdefault(section, {})[key] = data.draw(values)
    # Never a real endpoint: only offline backends or names that do not exist.
    if "backend" in cfg["model"]:
        cfg["model"]["backend"] = (
            str(cfg["model"]["backend"]) if cfg["model"]["backend"] in ("replay",) else "nonesuch"
        )
    cfg["model"].setdefault("base_url", "http://127.0.0.1:9/v1")
    exp = tmp_path / f"exp-{abs(hash(json.dumps(cfg, sort_keys=True, default=str))) % 10**8}.toml"
    lines = ['name = "fuzz"']
    for section, table in cfg.items():
        lines.append(f"[{section}]")
        lines += [f"{json.dumps(k)} = {toml_value(v)}" for k, v in table.items()]
    exp.write_text("\n".join(lines) + "\n")
    run = tmp_path / "run"
    shutil.rmtree(run, ignore_errors=True)
    code = main(["run", "--config", str(exp), "--run-dir", str(run), "--sessions", "1"])
    _check(code, capsys.readouterr().err, [exp, run, corpus])


lines = st.one_of(
    st.text(max_size=60),
    st.builds(
        json.dumps,
        st.dictionaries(
            st.sampled_from(["id", "messages", "schema", "meta", "role", "blocks"]), values, max_size=4
        ),
    ),
)


@FUZZ
@given(records=st.lists(lines, min_size=0, max_size=4), verb=st.sampled_from(["validate", "facts", "import"]))
def test_fuzz_corpus_files(base, tmp_path, capsys, records, verb):
    _, corpus, _ = base
    good = corpus.read_text().splitlines()[0]
    f = tmp_path / "c.jsonl"
    f.write_text("\n".join([good, *records]) + "\n", encoding="utf-8")
    if verb == "import":
        out = tmp_path / "out"
        shutil.rmtree(out, ignore_errors=True)
        code = main(["import", "auto", str(f), "--out", str(out)])
    else:
        code = main([verb, str(f)])
    _check(code, capsys.readouterr().err, [f])


@pytest.mark.slow
@FUZZ
@given(
    damage=st.sampled_from(
        [
            "config.json",
            "metrics.parquet",
            "decision.json",
            "events/baseline.jsonl",
            "corpus/sessions.jsonl",
            "model-calls.sqlite",
            "manifest",
        ]
    ),
    content=st.one_of(st.binary(max_size=40), st.text(max_size=40).map(str.encode)),
    verb=st.sampled_from(["report", "gate", "score", "compare", "continuation-table", "cache"]),
)
def test_fuzz_run_folders(base, tmp_path, capsys, damage, content, verb):
    _, _, run0 = base
    run = tmp_path / "run"
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(run0, run)
    target = run / ("corpus/manifest.json" if damage == "manifest" else damage)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    args = {
        "report": ["report", str(run), "--out", str(tmp_path / "rep")],
        "gate": ["gate", str(run), "--out", str(tmp_path / "gate")],
        "score": ["score", str(run), "--workers", "1"],
        "compare": ["compare", str(run0), str(run)],
        "continuation-table": ["continuation-table", str(run)],
        "cache": ["cache", "stats", str(run / "model-calls.sqlite")],
    }[verb]
    code = main(args)
    _check(code, capsys.readouterr().err, [target, run])


@pytest.mark.slow
@settings(FUZZ, max_examples=12)
@given(
    table=st.dictionaries(
        st.sampled_from(
            ["run", "arm", "session", "event", "round", "replicate", "metric", "value", "error", "x"]
        ),
        st.lists(
            st.one_of(st.integers(-3, 3), st.text(max_size=5), st.none(), st.floats(allow_nan=True)),
            min_size=2,
            max_size=2,
        ),
        min_size=1,
        max_size=9,
    ),
    rules=st.dictionaries(st.text(min_size=1, max_size=8), values, max_size=3),
)
def test_fuzz_metrics_tables_and_rules(base, tmp_path, capsys, table, rules):
    _, _, run0 = base
    run = tmp_path / "run"
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(run0, run)
    try:
        pd.DataFrame(table).to_parquet(run / "metrics.parquet")
    except Exception:  # mixed types pyarrow refuses: write them as strings
        pd.DataFrame(table).astype(str).to_parquet(run / "metrics.parquet")
    rf = tmp_path / "rules.toml"
    rf.write_text("\n".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in rules.items()) + "\n")
    for args in (
        ["gate", str(run), "--rules", str(rf), "--out", str(tmp_path / "g")],
        ["report", str(run), "--out", str(tmp_path / "r")],
    ):
        code = main(args)
        _check(code, capsys.readouterr().err, [run / "metrics.parquet", rf, run])


# Verbs whose every argument can be fuzzed cheaply (run, bench and fake-server are long-running
# by design; run's inputs are fuzzed through its config above).
QUICK_VERBS = [
    "validate",
    "facts",
    "candidates",
    "report",
    "compare",
    "gate",
    "import",
    "importers",
    "cache",
    "probes",
    "score",
    "continue",
    "continuation-table",
    "synth",
]


@FUZZ
@given(
    verb=st.sampled_from(QUICK_VERBS),
    words=st.lists(
        st.sampled_from(
            [
                "MISSING",
                "FILE",
                "DIR",
                "--out",
                "--sessions",
                "-1",
                "0",
                "x=y",
                "--rules",
                "stats",
                "--arms",
                ",",
                "--suite",
                "--fail-on",
                "nonsense",
                "--require",
                "a=b",
            ]
        ),
        max_size=5,
    ),
)
def test_fuzz_argv(base, tmp_path, capsys, verb, words):
    f = tmp_path / "file.txt"
    f.write_text("not what any verb wants\n")
    d = tmp_path / "dir"
    d.mkdir(exist_ok=True)
    subst = {"MISSING": str(tmp_path / "missing"), "FILE": str(f), "DIR": str(d)}
    argv = [verb, *(subst.get(w, w) for w in words)]
    if verb == "synth" and "--out" not in argv:
        argv += ["--out", str(tmp_path / "synth")]
    if verb == "synth":
        argv += ["--sessions", "1"]  # last wins: keep the corpus tiny
    # In its own folder: a bare word such as "nonsense" is a relative path to a verb, and once
    # `evalkit report nonsense` wrote nonsense/report/report.md into the checkout.
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        try:
            code = main(argv)
        except SystemExit as e:  # argparse: a usage error
            code = e.code
        _check(
            code,
            capsys.readouterr().err,
            [f, d, tmp_path / "missing", tmp_path / "synth", *[Path(w).absolute() for w in argv]],
        )
    finally:
        os.chdir(cwd)
