"""The scan mapped over files with dask.bag on a distributed LocalCluster of two worker
processes (docs/scan.md, "Scale"): the same reports and summary as the single-process scan."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List

import dask.bag
from distributed import Client, LocalCluster

from doomloop.demo import trace_files
from doomloop.traces import ScanSummary, scan, scan_file


def test_a_bag_on_a_cluster_gives_the_single_process_scan(tmp_path: Path) -> None:
    extra = tmp_path / "broken.jsonl"
    extra.write_text('{"v": 1, "type": "user", "text": "hi"}\nnot json\n')
    files: List[str] = [*trace_files(), str(extra)]
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        assert len(client.scheduler_info()["workers"]) == 2
        file_scans = dask.bag.from_sequence(files, npartitions=len(files)).map(scan_file).compute()
        workers = set(client.run(os.getpid).values())
    serial = scan(files)
    assert [report for file_scan in file_scans for report in file_scan.reports] == list(serial)
    assert ScanSummary.of(file_scans) == serial.summary
    assert serial.summary.skipped == 1 and len(workers) == 2
