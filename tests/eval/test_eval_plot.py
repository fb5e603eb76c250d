"""The loop picture, the optional-dependency errors, and import laziness."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
from typing import Any, Tuple

import pytest

from doomloop.eval import LoopEvaluator, LoopHealthResult, plot_loop_health

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TAB_RED = (0xD6, 0x27, 0x28)
TAB_GREEN = (0x2C, 0xA0, 0x2C)


def pixels_near(path: pathlib.Path, rgb: Tuple[int, int, int]) -> int:
    image = pytest.importorskip("matplotlib.image").imread(path)
    numpy = pytest.importorskip("numpy")
    target = numpy.array(rgb) / 255.0
    return int((numpy.abs(image[..., :3] - target).max(axis=-1) < 0.03).sum())


def healthy_and_fired() -> Tuple[LoopHealthResult, LoopHealthResult]:
    clean = LoopEvaluator(name="clean").run({"score_history": [5.0, 7.0, 8.5]})
    fired = LoopEvaluator(name="fired").run(
        {"score_history": [5.0, 7.0, 8.5, 9.0]},
        guard_events=[{"type": "doom_loop", "iteration": 3}, {"level": "warning", "iteration": 2}, {"is_loop": True}],
    )
    return clean, fired


def test_plot_writes_a_png(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("matplotlib")
    clean, fired = healthy_and_fired()
    clean_path = clean.plot(tmp_path / "nested" / "clean.png")
    fired_path = plot_loop_health(fired, str(tmp_path / "fired.png"))
    assert clean_path == tmp_path / "nested" / "clean.png"
    for path in (clean_path, fired_path):
        data = path.read_bytes()
        assert data.startswith(PNG_SIGNATURE)
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        assert (width, height) == (800, 450)
    # Red marks where a guard fired (and the wasted span's edge); none on a clean loop.
    assert pixels_near(fired_path, TAB_RED) > 100
    assert pixels_near(clean_path, TAB_RED) == 0
    # The convergence star is green in both.
    assert pixels_near(clean_path, TAB_GREEN) > 100 and pixels_near(fired_path, TAB_GREEN) > 100


def test_plot_edge_cases(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("matplotlib")
    empty = LoopEvaluator().run({"score_history": []}, guard_events=[{"type": "doom_loop"}])
    assert empty.plot(tmp_path / "empty.png").read_bytes().startswith(PNG_SIGNATURE)
    long = LoopEvaluator(threshold=100.0).run(
        {"score_history": [float(i % 10) for i in range(5000)]},
        guard_events=[{"level": "critical", "iteration": i} for i in range(1, 5000, 7)],
    )
    assert long.plot(tmp_path / "long.png").read_bytes().startswith(PNG_SIGNATURE)


def test_plot_does_not_touch_pyplot_or_the_backend(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("matplotlib")
    code = (
        "import sys, matplotlib\n"
        "from doomloop.eval import LoopEvaluator\n"
        f"LoopEvaluator().run({{'score_history': [1.0, 9.0]}}).plot({str(tmp_path / 'p.png')!r})\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_results_without_history_cannot_be_plotted(tmp_path: pathlib.Path) -> None:
    bare = LoopHealthResult(1, 0, False, 0, 0.0, metadata={"num_iterations": 1})
    with pytest.raises(ValueError, match="no score_history"):
        bare.plot(tmp_path / "x.png")
    bare.metadata["score_history"] = [1.0, None]
    with pytest.raises(ValueError, match=r"\[1\] must be a finite number"):
        bare.plot(tmp_path / "x.png")


def test_missing_matplotlib_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    for module in (
        "matplotlib",
        "matplotlib.figure",
        "matplotlib.backends",
        "matplotlib.backends.backend_agg",
        "matplotlib.ticker",
    ):
        monkeypatch.setitem(sys.modules, module, None)
    health = LoopEvaluator().run({"score_history": [9.0]})
    # The hint works before the package is published too (not `doomloop[plot]`).
    hint = 'pip install "matplotlib>=3.7" (or, in a clone of doomloop: pip install ".[plot]")'
    with pytest.raises(ImportError, match=re.escape(f"plotting a loop needs matplotlib: {hint}")):
        health.plot(tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def run_python(code: str) -> Any:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout


def test_import_doomloop_does_not_import_eval() -> None:
    out = run_python("import sys, doomloop; print('doomloop.eval' in sys.modules)")
    assert out.strip() == "False"


def test_doomloop_eval_imports_no_optional_dependency() -> None:
    out = run_python(
        "import sys, doomloop.eval\n"
        "from doomloop.eval import LoopEvaluator\n"
        "LoopEvaluator().run({'score_history': [9.0]}).to_json()\n"
        "print(sorted(m for m in ('rich', 'matplotlib', 'asyncio') if m in sys.modules))"
    )
    assert out.strip() == "[]"
