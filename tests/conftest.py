"""Hypothesis settings for CI: the same examples every run (a failure there reproduces), no
per-example deadline and no too-slow health check (CI shares a small machine whose speed
varies). Locally, exploration stays random."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow])
if os.environ.get("CI"):
    settings.load_profile("ci")
