"""Adapters to the outside world, one module each: :mod:`~doomloop.integrations.openclaw`
(OpenClaw's ``tools.loopDetection`` config), :mod:`~doomloop.integrations.prometheus` (loop
events and gateway sessions as metrics). ``import doomloop`` imports none of them, and each
imports its own optional dependency only when used (prometheus: prometheus-client).
"""
