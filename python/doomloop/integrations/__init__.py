"""Adapters to the outside world, one module each: monitoring (:mod:`.prometheus`), the SDKs'
stream shapes (:mod:`.openai`, :mod:`.anthropic`) and the LiteLLM proxy (:mod:`.litellm`).
``import doomloop`` imports none of them, and each imports its own optional dependency only
when used (prometheus-client; litellm). The SDK stream guards need no SDK installed: they read
the SDKs' objects and the dicts of their JSON alike.
"""
