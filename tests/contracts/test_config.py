from __future__ import annotations

import pytest

from evalkit.contracts.config import ConfigError, config_hash, load_experiment
from tests.conftest import ROOT


def test_default_experiment_from_pyproject(monkeypatch):
    monkeypatch.chdir(ROOT)
    exp = load_experiment()
    assert exp.name == "default"
    assert exp.section("corpus")["sessions"] == 60
    assert exp.section("replay")["window"] == 200_000 and exp.section("replay")["reserve"] == 16_384
    assert "pyproject.toml[tool.evalkit]" in exp.source
    # The reference compactor summarizes the whole head (REFERENCES.md §1.A): no source budget.
    assert exp.section("replay")["summary_source_chars"] == 0


def test_seed003_experiment_sets_the_count_trigger_and_the_64_kib_source():
    """REFERENCES.md §1.C: keep the last 40 messages, render the oldest into a 64 KiB source."""
    exp = load_experiment(ROOT / "experiments" / "seed003.toml")
    replay = exp.section("replay")
    assert (replay["trigger"], replay["max_messages"], replay["summary_source_chars"]) == ("messages", 40, 65_536)
    assert "empty-source-stub" in replay["arms"] and exp.name == "seed003"


def test_file_overrides_and_hash(tmp_path):
    p = tmp_path / "exp.toml"
    p.write_text('name = "small"\n[corpus]\nsessions = 5\n')
    a = load_experiment(p)
    assert a.section("corpus") == {"kind": "synth", "sessions": 5, "path": "", "on_error": "skip"}
    assert a.hash == config_hash(a.config)
    b = load_experiment(p, {"corpus": {"sessions": 6}})
    assert a.hash != b.hash


def test_unknown_key_and_bad_toml_are_named(tmp_path):
    p = tmp_path / "exp.toml"
    p.write_text("corpse = 1\n")
    with pytest.raises(ConfigError, match=r"exp.toml: unknown key\(s\) corpse"):
        load_experiment(p)
    p.write_text("name = \n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_experiment(p)
