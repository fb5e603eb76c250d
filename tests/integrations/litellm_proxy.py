"""A real LiteLLM proxy for the tests: ``litellm --config`` in a process of its own on a free
loopback port, with a config.yaml holding the guardrail snippet of docs/litellm.md.

When litellm is not installed the tests skip, except under ``CI`` (set by CI runs), where
they fail: the proxy tests are part of the suite there.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional

import httpx
import pytest

from redis_helpers import free_port

DOCS = Path(__file__).resolve().parents[2] / "docs" / "litellm.md"
# The proxy refuses to start without a master key (of some strength); clients send it as their key.
MASTER_KEY = "sk-" + "5f0c" * 16


def require_litellm() -> None:
    """Skip (fail under CI) without litellm; with it, keep litellm off the network (it fetches
    its model cost map on import otherwise)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if importlib.util.find_spec("litellm") is None or importlib.util.find_spec("openai") is None:
        reason = 'litellm and openai are not installed (pip install "doomloop[litellm]" openai)'
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; under CI the proxy tests must run")
        pytest.skip(reason, allow_module_level=True)


def snippet() -> str:
    """The guardrail's config.yaml snippet, as docs/litellm.md documents it."""
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("```yaml\nguardrails:\n") + len("```yaml\n")
    return text[start : text.index("```", start)]


def config(upstream_url: str, options: Optional[Dict[str, Any]] = None, *, metrics: bool = False) -> str:
    """A config.yaml: two models on the fake upstream (``fake`` through its chat completions,
    ``claude-fake`` through its Anthropic messages), and the documented guardrail snippet
    (``options`` appended to its ``litellm_params``; None leaves the guardrail out); with
    ``metrics``, LiteLLM's Prometheus callback, which serves ``/metrics``."""
    lines = [
        "model_list:",
        "  - model_name: fake",
        "    litellm_params:",
        "      model: openai/fake",
        f"      api_base: {upstream_url}",
        "      api_key: sk-upstream",
        # Anthropic's /v1/messages, which the proxy relays as the upstream's raw SSE bytes.
        "  - model_name: claude-fake",
        "    litellm_params:",
        "      model: anthropic/claude-fake",
        f"      api_base: {upstream_url.removesuffix('/v1')}",
        "      api_key: sk-upstream",
        "general_settings:",
        f"  master_key: {MASTER_KEY}",
        "litellm_settings:",
        "  num_retries: 0",
        "  request_timeout: 30",
    ]
    if metrics:
        lines += ['  callbacks: ["prometheus"]', "  require_auth_for_metrics_endpoint: false"]
    text = "\n".join(lines) + "\n"
    if options is not None:
        text += snippet()
        for name, value in options.items():
            text += f"      {name}: {value}\n"
    return text


class Proxy:
    """A running proxy; ``url`` is its OpenAI base URL."""

    def __init__(self, directory: Path, config_text: str, name: str, *, wait: bool = True) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        path = directory / f"{name}.yaml"
        path.write_text(config_text, encoding="utf-8")
        self.log = directory / f"{name}.log"
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_LOG="ERROR", PYTHONUNBUFFERED="1")
        command = [sys.executable, "-m", "litellm.proxy.proxy_cli", "--config", str(path), "--host", "127.0.0.1"]
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen([*command, "--port", str(self.port)], stdout=log, stderr=subprocess.STDOUT, env=env)
        if wait:
            self.wait()

    def wait(self) -> None:
        """Until the proxy answers its liveness probe (several starting at once share the
        machine: each may take minutes)."""
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"the proxy exited ({self.process.returncode}):\n{self.log.read_text()[-4000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health/liveliness", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        self.stop()
        pytest.fail(f"the proxy did not start in 600 s:\n{self.log.read_text()[-4000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
