"""Adapters to the outside world, one module each: :mod:`~doomloop.integrations.openclaw`
(OpenClaw's ``tools.loopDetection`` config), :mod:`~doomloop.integrations.prometheus` (loop
events and gateway sessions as metrics), the SDKs' stream shapes
(:mod:`~doomloop.integrations.openai`, :mod:`~doomloop.integrations.anthropic`) and the LiteLLM
proxy (:mod:`~doomloop.integrations.litellm`). ``import doomloop`` imports none of them, and each
imports its own optional dependency only when used (prometheus: prometheus-client; litellm:
litellm). The SDK stream guards need no SDK installed: they read the SDKs' objects and the
dicts of their JSON alike.
"""
