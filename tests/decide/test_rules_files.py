"""Rules tables (an experiment's ``[rules]``, a standalone rules file) go through the config's
models: one line naming the file and the key path, exit 2, before any work."""

from __future__ import annotations

import pytest

from evalkit.cli import main
from evalkit.contracts.exit_codes import EXIT_USAGE
from evalkit.decide.rules import RulesError, read_rules_file
from tests.support.runs import write_experiment

CASES = [
    ("alpah = 0.05\n", r"alpah: unknown key, did you mean alpha\? \(known: aa, alpha, baseline, "),
    ("alpha = 0.9\n", r"alpha: 0\.9: Input should be less than 0\.5"),
    ("alpha = 'x'\n", r"alpha: 'x': Input should be a valid number"),
    ("min_sessions = 1\n", r"min_sessions: 1: Input should be greater than or equal to 2"),
    ("guardrails = 'g'\n", r"guardrails: 'g': Input should be a valid list"),
    ("metrics = { m = 3 }\n", r"metrics\.m: 3: expected a table"),
    ("[metrics.m]\ndirection = 'up'\n", r"metrics\.m\.direction: 'up': Input should be 'higher' or 'lower'"),
    ("[metrics.m]\ndirection = 'lower'\nmargin = 'ten%'\n", r"metrics\.m\.margin: 'ten%': expected a number or"),
    ("[metrics.m]\ndirection = 'lower'\nmargin = -1\n", r"metrics\.m\.margin: -1: must be ≥ 0"),
    ("[candidates.c]\nsucess = ['m']\n", r"candidates\.c\.sucess: unknown key, did you mean success\? \(known: guardrails, success\)"),
    ("[candidates.c]\nsuccess = ['zz']\n", r"candidates\.c: metric 'zz' has no \[metrics\.zz\] rule"),
]


@pytest.mark.parametrize(("text", "message"), CASES)
def test_a_bad_rules_file_is_one_line_naming_the_file_and_the_key(tmp_path, text, message):
    f = tmp_path / "rules.toml"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(RulesError, match=r"rules\.toml: " + message) as e:
        read_rules_file(f)
    assert "\n" not in str(e.value)


def test_an_experiments_rules_table_is_checked_with_the_experiment(tmp_path, capsys):
    exp = write_experiment(tmp_path / "exp.toml", None, rules={"metrics": {"m": {"direction": "up"}}})
    assert main(["run", "--config", str(exp), "--run-dir", str(tmp_path / "run")]) == EXIT_USAGE
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "exp.toml: rules.metrics.m.direction: 'up'" in err[0], err
    assert not (tmp_path / "run").exists()


def test_a_bad_rules_file_named_by_an_experiment_exits_2_before_any_work(tmp_path, capsys):
    (tmp_path / "strict.toml").write_text("[metrics.m]\ndirection = 'higher'\nmin_effect = 'lots'\n")
    exp = write_experiment(tmp_path / "exp.toml", None, rules={"file": "strict.toml"})
    assert main(["run", "--config", str(exp), "--run-dir", str(tmp_path / "run")]) == EXIT_USAGE
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "metrics.m.min_effect: 'lots': expected a number or a percentage" in err[0], err
    assert not (tmp_path / "run").exists()


def test_an_experiments_rules_may_name_the_projects_metrics(tmp_path):
    """The table is checked on its own for keys and types; names are checked on the rules as
    applied (the project's extended by it), where the project defines summary_tokens."""
    from evalkit.contracts.config import validate_config
    from evalkit.decide.rules import resolve_rules
    from tests.conftest import ROOT

    cfg = validate_config({"rules": {"candidates": {"short": {"success": ["summary_tokens"]}}}}, "exp.toml")
    rules = resolve_rules(cfg.rules, ROOT)
    assert rules.for_candidate("short").success == ("summary_tokens",)
    assert rules.metrics["summary_tokens"].direction == "lower"
