"""Renderers of a scan (:func:`doomloop.traces.scan`): readable text (rich when installed,
plain otherwise), the versioned JSON document (docs/schemas/scan-v1.json) and a
self-contained HTML report with a timeline per session (plotly, the ``html`` extra).

Each takes the :class:`~doomloop.traces.scan.SessionReport` s and the
:class:`~doomloop.traces.scan.ScanSummary`; none reads a trace itself.
"""
