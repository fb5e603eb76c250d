"""Hypothesis settings for CI: the same examples every run (a failure there reproduces) and
no per-example deadline (CI shares a small machine). Locally, exploration stays random."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
