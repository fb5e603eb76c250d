"""Integrations with monitoring and agent frameworks, one module each, built on the detectors'
``on_event`` callbacks. ``import doomloop`` imports none of them, and each imports its own
optional dependency only when used (:mod:`doomloop.integrations.prometheus`: prometheus-client).
"""
