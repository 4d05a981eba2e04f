"""Stages receive their typed config section, never a dict: a test over every public signature
of the stage packages, and a check that a stage uses the non-default value it is given."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import typing

import pytest

from evalkit.contracts.config import (
    ContinuationConfig,
    CorpusConfig,
    ExecutorConfig,
    ExperimentConfig,
    ModelConfig,
    ReplayConfig,
    RulesConfig,
)

STAGE_PACKAGES = ("pipeline", "replay", "score", "decide", "report", "continuation", "corpus", "models")
CONFIG_NAME = re.compile(
    r"^(config|cfg|settings|section|model|model_settings|replay|corpus|continuation|cont|executor)$"
)
UNTYPED = re.compile(r"^(dict|Mapping|dict\[.*\]|Mapping\[.*\])( \| None)?$")


def _modules():
    for pkg in STAGE_PACKAGES:
        root = importlib.import_module(f"evalkit.{pkg}")
        yield root
        for info in pkgutil.walk_packages(root.__path__, f"evalkit.{pkg}."):
            try:
                yield importlib.import_module(info.name)
            except ImportError as e:  # an optional extra (ray) that is not installed
                if "ray" not in str(e):
                    raise


def _public_functions():
    seen = set()
    for mod in _modules():
        for name, obj in vars(mod).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != mod.__name__:
                continue
            funcs = [obj] if inspect.isfunction(obj) else []
            if inspect.isclass(obj):
                funcs = [
                    f
                    for n, f in vars(obj).items()
                    if inspect.isfunction(f) and (n == "__init__" or not n.startswith("_"))
                ]
                funcs += [f.__func__ for f in vars(obj).values() if isinstance(f, classmethod)]
            for f in funcs:
                if f not in seen:
                    seen.add(f)
                    yield mod.__name__, f


def test_no_stage_function_takes_its_config_as_a_dict():
    offenders = []
    for mod, f in _public_functions():
        for p in inspect.signature(f).parameters.values():
            ann = p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", "")
            if CONFIG_NAME.match(p.name) and UNTYPED.match(str(ann).strip()):
                offenders.append(f"{mod}.{f.__qualname__}({p.name}: {ann})")
    assert not offenders, "config passed as a dict:\n" + "\n".join(offenders)


ENTRY_POINTS = {
    "evalkit.corpus.build:build_corpus": {"section": CorpusConfig},
    "evalkit.replay.engine:replay_corpus": {"replay": ReplayConfig, "model": ModelConfig},
    "evalkit.replay.batch:batch_replay": {"replay": ReplayConfig, "model": ModelConfig},
    "evalkit.continuation.stage:run_continuation": {
        "section": ContinuationConfig | None,
        "model": ModelConfig | None,
    },
    "evalkit.models.client:build_client": {"settings": ModelConfig},
    "evalkit.models.client:make_client": {"settings": ModelConfig},
    "evalkit.decide.health:check_run": {"cfg": ExperimentConfig},
    "evalkit.decide.rules:resolve_rules": {"section": RulesConfig | None},
    "evalkit.pipeline.endpoints:check_endpoints": {"config": ExperimentConfig},
    "evalkit.pipeline.warnings:write": {"config": ExperimentConfig},
    "evalkit.pipeline.executors:run_local": {"settings": ExecutorConfig},
}


@pytest.mark.parametrize("target", sorted(ENTRY_POINTS))
def test_every_stage_entry_takes_its_typed_section(target):
    mod, name = target.split(":")
    hints = typing.get_type_hints(getattr(importlib.import_module(mod), name))
    for param, want in ENTRY_POINTS[target].items():
        assert hints[param] == want, f"{target}({param}: {hints[param]})"


def test_a_stage_uses_the_non_default_value_it_is_given(tmp_path):
    """A section's non-default value reaches the stage: a default restated inside a stage (the old
    ``section.get("sessions", 200)``) would ignore it."""
    from evalkit.corpus import build_corpus
    from evalkit.models.client import build_client
    from evalkit.replay.settings import ReplaySettings

    assert build_corpus(CorpusConfig(sessions=3), 7, tmp_path / "c", workers=1)["stats"]["sessions"] == 3
    assert build_corpus(CorpusConfig(sessions=2), 7, tmp_path / "d", workers=1)["stats"]["sessions"] == 2
    s = ReplaySettings.from_section(
        ReplayConfig(window=50_000, reserve=5_000, keep_recent=1_000, max_messages=9)
    )
    assert (s.threshold, s.kept_messages) == (45_000, 4)
    client = build_client(ModelConfig(replicates=3, cache="off"))
    assert client.replicates == 3 and client.policy == "off"
    # and a typed section's defaults are the only ones ReplaySettings knows
    assert ReplaySettings() == ReplaySettings.from_section(ReplayConfig())
