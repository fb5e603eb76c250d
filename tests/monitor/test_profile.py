"""Profile: the named profiles, replace, files (TOML and JSON) and their errors."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from doomloop import ChantConfig, ConfigError, DoomLoopConfig, LoopDetectionConfig, Profile


def test_the_named_profiles() -> None:
    recommended = Profile.recommended()
    assert recommended.name == "recommended" and recommended.session == DoomLoopConfig.recommended()
    assert recommended.tool_loop == LoopDetectionConfig() and recommended.chant == ChantConfig(32, 6)
    parity = Profile.parity()
    assert parity.session == DoomLoopConfig() and parity.chant == ChantConfig(50, 8)
    assert parity.tool_loop == LoopDetectionConfig.from_openclaw({"enabled": True}, strict=False)
    assert not parity.tool_loop.cycle and not parity.tool_loop.argument_churn and parity.tool_loop.enabled
    openclaw = Profile.from_openclaw({"tools": {"loopDetection": {"enabled": True, "warningThreshold": 4}}})
    assert openclaw.name == "openclaw" and openclaw.tool_loop.warning_threshold == 4
    assert openclaw.session == recommended.session


def test_replace_routes_each_setting_to_its_part_and_checks_it() -> None:
    profile = Profile.recommended().replace(name="p", warning_threshold=3, critical_threshold=6, max_identical_actions=4)
    assert (profile.name, profile.tool_loop.warning_threshold, profile.session.max_identical_actions) == ("p", 3, 4)
    both = profile.replace(content_chunk_size=40)
    assert both.session.content_chunk_size == 40 and both.chant.content_chunk_size == 40
    only = profile.replace(chant={"content_chunk_size": 40})
    assert only.chant.content_chunk_size == 40 and only.session.content_chunk_size == 32
    assert profile.replace(session=DoomLoopConfig()).session == DoomLoopConfig()
    with pytest.raises(TypeError, match="no setting 'bogus'"):
        profile.replace(bogus=1)
    with pytest.raises(ConfigError, match="max_period"):
        profile.replace(max_period=10**6)
    with pytest.raises(TypeError, match=r"Profile\.chant must be a ChantConfig"):
        profile.replace(chant=DoomLoopConfig())
    with pytest.raises(TypeError, match=r"Profile\.session must be a DoomLoopConfig"):
        Profile(session=ChantConfig())  # type: ignore[arg-type]


def test_a_profile_is_an_immutable_value() -> None:
    profile = Profile.recommended()
    assert profile == Profile.recommended() and hash(profile) == hash(Profile.recommended())
    assert pickle.loads(pickle.dumps(profile)) == profile and profile != Profile.parity()
    with pytest.raises(AttributeError, match="immutable"):
        profile.name = "x"  # type: ignore[misc]


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_a_file_round_trips(tmp_path: Path, suffix: str) -> None:
    profile = Profile.parity().replace(
        name="mine", warning_threshold=7, critical_threshold=9, seed=5, max_total_time=float("inf")
    )
    path = tmp_path / f"p{suffix}"
    profile.dump(path)
    assert Profile.load(path) == profile


def test_a_file_overrides_its_base(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text('base = "parity"\n[tool_loop]\nwarning_threshold = 4\n[chant]\ncontent_chunk_size = 20\n')
    profile = Profile.load(path)
    assert profile.name == "gateway" and profile.session == DoomLoopConfig()
    assert profile.tool_loop.warning_threshold == 4 and profile.chant.content_chunk_size == 20
    assert profile.tool_loop.critical_threshold == Profile.parity().tool_loop.critical_threshold
    path = tmp_path / "empty.json"
    path.write_text("{}")
    assert Profile.load(path).replace(name="recommended") == Profile.recommended()


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("bad.toml", "[tool_loop]\nwarning_threshold = 'x'\n", r"bad\.toml: .*warning_threshold"),
        ("bad.toml", "[tool_loop]\nwarning_treshold = 3\n", r"bad\.toml: \[tool_loop\] has no setting 'warning_treshold'"),
        ("bad.toml", "[tools]\n", r"bad\.toml: unknown key 'tools'"),
        ("bad.toml", "base = 'fast'\n", r"bad\.toml: base must be one of recommended, parity"),
        ("bad.toml", "[chant\n", r"bad\.toml: not a TOML profile"),
        ("bad.json", "[1]", r"bad\.json: a profile must be a table"),
        ("bad.json", '{"session": 3}', r"bad\.json: \[session\] must be a table"),
        ("bad.json", '{"chant": {"max_period": 0}}', r"bad\.json: .*max_period"),
        ("bad.yaml", "name: x\n", r"bad\.yaml: a profile file ends in \.toml or \.json"),
    ],
)
def test_a_bad_file_is_a_config_error_naming_file_and_key(tmp_path: Path, name: str, content: str, problem: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ConfigError, match=problem):
        Profile.load(path)


def test_a_missing_file_and_an_unwritable_null(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the profile"):
        Profile.load(tmp_path / "nope.toml")
    unset = Profile.from_openclaw({})  # no `enabled` key: OpenClaw's unset
    assert unset.tool_loop.enabled is None
    with pytest.raises(ConfigError, match="TOML cannot say"):
        unset.dump(tmp_path / "p.toml")
    unset.dump(tmp_path / "p.json")
    assert json.loads((tmp_path / "p.json").read_text())["tool_loop"]["enabled"] is None
    assert Profile.load(tmp_path / "p.json") == unset
