"""Benchmarks run as plain tests by default (``--benchmark-disable``); enable them with
``--benchmark-enable --benchmark-only``. The upstream references they compare against are
benchmark-only dependencies (the ``bench`` extra)."""
