from __future__ import annotations

import pytest

from evalkit.config import ConfigError, config_hash, load_experiment
from tests.conftest import ROOT


def test_default_experiment_from_pyproject(monkeypatch):
    monkeypatch.chdir(ROOT)
    exp = load_experiment()
    assert exp.name == "default"
    assert exp.section("corpus")["sessions"] == 200
    assert exp.section("replay")["window"] == 200_000 and exp.section("replay")["reserve"] == 16_384
    assert "pyproject.toml[tool.evalkit]" in exp.source


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
