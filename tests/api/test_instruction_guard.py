"""The instruction-count regression guard (benches/instruction_counts.py --check): a path over
its baseline by more than the tolerance fails the check, one within it passes. The counts
themselves come from callgrind in CI; here ``measure`` is replaced, so the rule is what is
tested."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any, Dict

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benches" / "instruction_counts.py"


def load() -> Any:
    spec = importlib.util.spec_from_file_location("instruction_counts", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_baseline_covers_the_guarded_paths() -> None:
    counts = load()
    baseline = json.loads(counts.BASELINE.read_text(encoding="utf-8"))["instructions"]
    assert sorted(baseline) == sorted(counts.GUARDED)
    assert all(name in counts.SCENARIOS and baseline[name] > 0 for name in baseline)


@pytest.mark.parametrize(("growth", "verdict"), [(0.0, 0), (0.049, 0), (-0.3, 0), (0.051, 1), (0.5, 1)])
def test_check_fails_only_past_the_tolerance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], growth: float, verdict: int
) -> None:
    counts = load()
    baseline: Dict[str, float] = {"session": 2000.0, "tool": 9000.0}
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps({"instructions": baseline}), encoding="utf-8")
    monkeypatch.setattr(counts, "BASELINE", path)
    measured = {"session": 2000.0, "tool": 9000.0 * (1 + growth)}
    monkeypatch.setattr(counts, "measure", measured.__getitem__)
    assert counts.check() == verdict
    output = capsys.readouterr()
    assert ("OVER" in output.out) == bool(verdict)
    if verdict:
        assert "tool" in output.err and "baseline" in output.err
