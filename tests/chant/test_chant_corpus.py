"""No false alarms at default settings on text nobody here wrote: every .py file of the
standard library, every installed distribution's description, and generated markdown
tables, lists, JSON arrays of records and whitespace runs."""

from __future__ import annotations

import importlib.metadata
import json
import random
import sysconfig
from pathlib import Path
from typing import Optional

from doomloop import ChantDetector, ChantEvent

STDLIB = Path(sysconfig.get_paths()["stdlib"])

# Alarms on the standard library that are real repetition, each checked below to be what
# its note says: one identical line repeated (period = one whole line). The codec table is
# only just long enough, so whether it alarms depends on the detector's random key.
EXPLAINED = {
    "encodings/iso8859_8.py": "decoding table: the line \"'\\ufffe'\" (undefined byte) 32 times in a row",
    "test/test_email/test_email.py": "test message body: the line 'text/plain' repeated 20+ times",
}


def scan(text: str) -> Optional[ChantEvent]:
    return ChantDetector().feed(text)


def test_standard_library_sources() -> None:
    files = sorted(p for p in STDLIB.rglob("*.py") if "site-packages" not in p.parts)
    assert len(files) > 500, "the standard library was not found"
    alarms = {}
    for path in files:
        event = scan(path.read_text(encoding="utf-8", errors="surrogateescape"))
        if event is not None:
            alarms[path.relative_to(STDLIB).as_posix()] = (path, event)
    print(f"scanned {len(files)} stdlib files, {len(alarms)} alarms: {sorted(alarms)}")
    assert set(alarms) <= set(EXPLAINED), sorted(set(alarms) - set(EXPLAINED))
    for path, event in alarms.values():
        text = path.read_text(encoding="utf-8")
        assert event.period is not None
        unit = text[event.start : event.start + event.period]
        line_start = text.rfind("\n", 0, event.end - event.period) + 1
        line = text[line_start : text.index("\n", line_start) + 1]
        # The repeated unit is one whole line (rotated to where the repetition started).
        assert unit.count("\n") == 1 and len(unit) == len(line) and (unit * 2).find(line) >= 0


def test_installed_package_descriptions() -> None:
    scanned = 0
    alarms = []
    for dist in importlib.metadata.distributions():
        meta = dist.metadata
        text = meta.get_payload() or meta.get("Description") or ""  # type: ignore[attr-defined]
        if not isinstance(text, str) or not text:
            continue
        scanned += 1
        if scan(text) is not None:
            alarms.append(meta["Name"])
    print(f"scanned {scanned} package descriptions, {len(alarms)} alarms: {alarms}")
    assert scanned >= 10
    assert alarms == []


def markdown_table(rng: random.Random, rows: int) -> str:
    header = "| id | name | status | owner | updated |\n|----|------|--------|-------|---------|\n"
    names = ["alpha", "beta", "gamma", "delta", "epsilon"]
    body = "".join(
        f"| {i} | {rng.choice(names)} | {rng.choice(['ok', 'failed', 'pending'])} | team-{rng.randrange(9)} "
        f"| 2024-0{rng.randrange(1, 10)}-1{rng.randrange(10)} |\n"
        for i in range(rows)
    )
    return header + body


def json_records(rng: random.Random, rows: int) -> str:
    records = [
        {"id": i, "name": f"user{i}", "active": True, "roles": ["reader"], "quota": 100, "tags": [], "created_by": "system"}
        for i in range(rows)
    ]
    return json.dumps(records, indent=rng.choice([None, 2]))


def markdown_list(rng: random.Random, items: int) -> str:
    verbs = ["Install", "Configure", "Run", "Check", "Deploy", "Document"]
    return "".join(f"- [ ] {rng.choice(verbs)} step {i}: see section {i + 1} of the guide\n" for i in range(items))


def test_generated_structured_text() -> None:
    rng = random.Random(7)
    samples = []
    for rows in (10, 100, 2000):
        samples += [markdown_table(rng, rows), json_records(rng, rows), markdown_list(rng, rows)]
    samples += [
        "\n" * 5000,
        " " * 5000,
        "\t\t\t\n" * 2000,
        "".join(f"{' ' * (4 * (i % 6))}x = {i}\n" for i in range(3000)),
        "\u3000" * 3000 + "\u00a0" * 3000,
    ]
    for sample in samples:
        for window, repeats in ((50, 8), (20, 8), (50, 4)):
            assert ChantDetector(window, repeats).feed(sample) is None, sample[:200]


def test_the_same_generators_do_alarm_when_a_row_chants() -> None:
    # The filters are not blind to structure: one record repeated verbatim is a chant.
    row = "| 7 | gamma | failed | team-3 | 2024-05-17 |\n"
    assert ChantDetector().feed(markdown_table(random.Random(1), 20) + row * 20) is not None
    record = '{"id": 7, "name": "user7", "active": true},\n'
    assert ChantDetector().feed("[" + record * 20) is not None
