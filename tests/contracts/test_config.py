from __future__ import annotations

import json
import tomllib

import pytest
import tomli_w
from pydantic import Field

from evalkit.contracts.config import (
    ConfigError,
    CorpusConfig,
    ExperimentConfig,
    MetricRuleConfig,
    ReplayConfig,
    Section,
    config_hash,
    load_experiment,
    validate_config,
)
from tests.conftest import ROOT

# The default experiment's hash before typed configs (0635c5a): run folders and resumes depend on it.
DEFAULT_HASH = "20a50e048393e61664361f779c856b80ad82fc212d6a087b616dbe623bf76a04"


def test_default_experiment_from_pyproject(monkeypatch):
    monkeypatch.chdir(ROOT)
    exp = load_experiment()
    assert exp.name == "default"
    assert exp.config.corpus.sessions == 60
    assert exp.config.replay.window == 200_000 and exp.config.replay.reserve == 16_384
    assert "pyproject.toml[tool.evalkit]" in exp.source
    # The reference compactor summarizes the whole head (REFERENCES.md §1.A): no source budget.
    assert exp.config.replay.summary_source_chars == 0


def test_default_experiment_keeps_its_hash_from_before_typed_configs(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert load_experiment().hash == DEFAULT_HASH
    # seed003 sets only keys that existed then, each to a non-default value: its hash is kept too.
    assert load_experiment(ROOT / "experiments" / "seed003.toml").hash == (
        "ac136924ea60af3e51ce4a20b20dc9ff1b1a4a5df034273536f7e3d3e6490272"
    )


def test_seed003_experiment_sets_the_count_trigger_and_the_64_kib_source():
    """REFERENCES.md §1.C: keep the last 40 messages, render the oldest into a 64 KiB source."""
    exp = load_experiment(ROOT / "experiments" / "seed003.toml")
    replay = exp.config.replay
    assert (replay.trigger, replay.max_messages, replay.summary_source_chars) == ("messages", 40, 65_536)
    assert "empty-source-stub" in replay.arms and exp.name == "seed003"


def test_file_overrides_and_hash(tmp_path):
    p = tmp_path / "exp.toml"
    p.write_text('name = "small"\n[corpus]\nsessions = 5\n')
    a = load_experiment(p)
    assert a.config.corpus == CorpusConfig(sessions=5)
    assert a.hash == config_hash(a.config) == config_hash(a.config.dump())
    b = load_experiment(p, {"corpus": {"sessions": 6}})
    assert a.hash != b.hash


# --------------------------------------------------------------------------- the hash rule


def test_a_new_defaulted_key_leaves_the_hash_and_a_changed_value_changes_it(monkeypatch):
    """The hash is over what differs from the defaults: a key added later with a default (here a
    model with one more field) hashes like the config without it; setting it differently does not."""
    import evalkit.contracts.config as config

    raw = {"name": "x", "replay": {"window": 100_000, "reserve": 8_000, "keep_recent": 10_000}}
    before = config_hash(validate_config(raw, "x.toml"))

    class ReplayWithMore(ReplayConfig):
        new_knob: int = Field(7, ge=0)

    class ExperimentWithMore(ExperimentConfig):
        replay: ReplayWithMore = ReplayWithMore()

    monkeypatch.setattr(config, "ExperimentConfig", ExperimentWithMore)
    grown = validate_config(raw, "x.toml")
    assert grown.replay.new_knob == 7 and config_hash(grown) == before
    assert config_hash(validate_config({**raw, "replay": {**raw["replay"], "new_knob": 8}}, "x")) != before
    assert config_hash(validate_config({**raw, "seed": 1}, "x")) != before


def test_the_hash_ignores_spelling_rules_spending_and_executor():
    base = config_hash(ExperimentConfig())
    # a default spelled out, an int for a float, key order: the same config
    assert config_hash(validate_config({"replay": {"external_timeout": 60, "window": 200_000}}, "x")) == base
    assert config_hash(validate_config({"rules": {"alpha": 0.01}, "executor": {"shards": 4}}, "x")) == base
    assert config_hash(validate_config({"model": {"max_calls": 10, "batch": True}}, "x")) == base
    assert config_hash(validate_config({"model": {"timeout": 5}}, "x")) != base


# --------------------------------------------------------------------------- one place for defaults


def test_defaults_round_trip_through_toml_json_and_the_schema():
    """The models' defaults are the only ones: dumped to TOML (and to config.json) and loaded back
    they are equal, and the JSON schema states the same defaults the dump holds."""
    cfg = ExperimentConfig()
    dumped = cfg.dump()
    assert validate_config(tomllib.loads(tomli_w.dumps(dumped)), "t.toml") == cfg
    assert validate_config(json.loads(json.dumps(dumped)), "config.json") == cfg
    schema = ExperimentConfig.model_json_schema()
    for section, table in dumped.items():
        if not isinstance(table, dict):
            assert schema["properties"][section]["default"] == table
            continue
        ref = schema["properties"][section]["$ref"].split("/")[-1]
        props = schema["$defs"][ref]["properties"]
        assert set(table) <= set(props), section
        for key, value in table.items():
            default = props[key].get("default")
            if isinstance(default, dict):  # a nested table: its unset (None) keys are not dumped
                default = {k: v for k, v in default.items() if v is not None}
            if "default" in props[key]:
                assert default == value, f"{section}.{key}"


def test_every_section_forbids_unknown_keys_and_has_a_default_for_each_key():
    def walk(model):
        assert model.model_config.get("extra") == "forbid", model.__name__
        for name, f in model.model_fields.items():
            ann = f.annotation
            if isinstance(ann, type) and issubclass(ann, Section):
                walk(ann)
            if model is not MetricRuleConfig:  # a metric rule without its direction means nothing
                assert not f.is_required(), f"{model.__name__}.{name} has no default"

    walk(ExperimentConfig)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("corpse = 1\n", r"exp\.toml: corpse: unknown key, did you mean corpus\? \(known: continuation, corpus, "),
        (
            "[replay]\nwindwo = 1\n",
            r"exp\.toml: replay\.windwo: unknown key, did you mean window\? \(known: arms, external_timeout, ",
        ),
        ("[replay]\nwindow = 'big'\n", r"exp\.toml: replay\.window: 'big': Input should be a valid integer"),
        (
            "[replay]\nreserve = 200000\n",
            r"exp\.toml: replay\.reserve: must be less than replay\.window \(200000\)",
        ),
        (
            "[replay]\nkeep_recent = 190000\n",
            r"exp\.toml: replay\.keep_recent: 190000 ≥ the trigger threshold",
        ),
        ("[replay]\ntrigger = 'sometimes'\n", r"exp\.toml: replay\.trigger: 'sometimes': Input should be"),
        ("[replay]\narms = ['a', 'a']\n", r"exp\.toml: replay\.arms: .*listed twice"),
        (
            "[model]\nconcurrency = 0\n",
            r"exp\.toml: model\.concurrency: 0: Input should be greater than or equal to 1",
        ),
        ("[model]\napi_key = 'sk-1'\n", r"exp\.toml: model\.api_key: secrets are not read from the config"),
        (
            "[continuation.model]\nmodle = 'x'\n",
            r"exp\.toml: continuation\.model\.modle: unknown key, did you mean model\? \(known: api_key_env",
        ),
        ("[rules.metrics.m]\ndirection = 'up'\n", r"exp\.toml: rules\.metrics\.m\.direction: 'up'"),
        (
            "[rules.metrics.m]\ndirection = 'higher'\nmragin = 1\n",
            r"exp\.toml: rules\.metrics\.m\.mragin: unknown key, did you mean margin\? \(known: direction, margin",
        ),
        (
            "[score]\njudge_budget = 'calibrate'\n",
            r"exp\.toml: score\.judge_budget: calibrating needs the ceiling arm",
        ),
        ("name = 'a/b'\n", r"exp\.toml: name: 'a/b': expected a non-empty name without '/'"),
        ("seed = true\n", r"exp\.toml: seed: True: Input should be a valid integer"),
        ("name = \n", "invalid TOML"),
    ],
)
def test_a_bad_experiment_is_one_line_naming_the_file_and_the_key(tmp_path, text, message):
    p = tmp_path / "exp.toml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message) as e:
        load_experiment(p)
    assert "\n" not in str(e.value)


def test_a_bad_experiment_exits_2_with_one_line(tmp_path, capsys):
    from evalkit.cli import main
    from evalkit.contracts.exit_codes import EXIT_USAGE

    p = tmp_path / "exp.toml"
    p.write_text("[replay]\nreserve = 200000\n", encoding="utf-8")
    assert main(["run", "--config", str(p), "--run-dir", str(tmp_path / "run")]) == EXIT_USAGE == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert (
        len(lines) == 1 and "exp.toml: replay.reserve: must be less than replay.window (200000)" in lines[0]
    )
    assert not (tmp_path / "run").exists()
