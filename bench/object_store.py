"""Benchmark of the object-store sources: an ambassador over a bucket of --objects objects
(100,000), beside boto3's own paginator listing the same bucket in the same run (the floor); and
for Cloud Storage and Azure Blob Storage, one listing by the source beside the official client's
own paginator over the same emulator.

Prints:
  * the floor: boto3's ListObjectsV2 paginator listing every key with the requests the source
    makes (the same prefix and delimiter; best of 3);
  * cold start of `workqueue ambassador --source s3://...` (2 workers): launch to every object
    listed over HTTP, and its ratio to the floor (goal <= 2x);
  * the ambassador's RSS (all processes) against the same server on an empty bucket, per item
    (goal <= 300 B, the folder source's): once every object is listed, and the highest it
    reaches while the bucket is listed again and again (`--poll-interval 1`: moto takes as long
    to list it as the cold start did, so the publisher re-lists back to back);
  * one poll with nothing new: the requests it makes (goal: one listing - a page per 1,000
    objects - and no per-object request), its time, and what it costs at S3's list price.

For Cloud Storage (gcp-storage-emulator, in this process) and Azure (Azurite, Node.js): the
floor is the official client's paginator (google-cloud-storage's list_blobs, azure-storage-blob's
walk_blobs), iterated with the arguments the source gives it (the prefix, the `/` delimiter,
its page size); the source's figure is one whole re-listing as its poller does it (`_relist`:
the pages, each object's name and meta, the packed listing, the diff against the last one) -
best of three each, in the same process; goal <= 1.1x. The emulator of Cloud Storage answers
the whole listing as one page and ignores `fields`, which real Cloud Storage does not.

The S3 store is moto's S3 server (`ThreadedMotoServer`) in this process, over HTTP on loopback,
filled through its backend (100,000 PUTs over HTTP would take minutes and measure nothing).
moto answers a page far more slowly than S3 does, and both the floor and the ambassador pay
that: the ratio is the figure, not the seconds.

Run: .venv/bin/python -m bench.object_store [--objects 100000] [--stores s3,gcs,azure] [--quick]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import requests

from bench import parsed
from bench.serving import free_port, rss_tree_mb, wait_listed
from tests.support.stores import ObjectStore

LIST_PRICE_PER_1000 = 0.005  # USD, S3 Standard LIST requests (us-east-1)


def floor_seconds(store: ObjectStore, bucket: str) -> tuple[float, int]:
    """boto3's paginator over the whole bucket: best of three, and the keys it saw."""
    s3 = store.client()
    times, count = [], 0
    for _ in range(3):
        started = time.perf_counter()
        count = 0
        pages = s3.get_paginator("list_objects_v2").paginate(
            Bucket=bucket,
            Prefix="",
            Delimiter="/",  # the requests the source makes
        )
        for page in pages:
            count += len(page.get("Contents") or ())
        times.append(time.perf_counter() - started)
    return min(times), count


def start(store: ObjectStore, bucket: str, expected: int, poll: str = "3600"):
    port = free_port()
    env = {**os.environ, **store.env}
    launched = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kube_workqueue.manager.cli", "ambassador", "--source", f"s3://{bucket}/",
         "--suffix", ".mp4", "--port", str(port), "--workers", "2", "--poll-interval", poll],
        env=env, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    wait_listed(base, expected, timeout=600)
    return proc, base, time.perf_counter() - launched


def quiet_poll(store: ObjectStore, bucket: str) -> tuple[dict[str, int], float, int, int]:
    """The live source in this process: the bytes its first listing keeps (tracemalloc), and
    one re-listing with nothing new - the requests it made by operation."""
    from kube_workqueue.ambassador.sources.registry import resolve, source_type

    for key, value in store.env.items():
        os.environ[key] = value
    import gc
    import tracemalloc

    spec = resolve(f"s3://{bucket}/", {"SUFFIXES": [".mp4"], "POLL_INTERVAL": 3600})
    source = source_type("s3").open(spec.config)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    source.start()
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    calls: dict[str, int] = {}

    def count(model, **_):
        calls[model.name] = calls.get(model.name, 0) + 1

    source.lister.s3.meta.events.register("before-call.s3", count)
    version = source.version
    started = time.perf_counter()
    source._relist()  # what the poller does every --poll-interval
    took = time.perf_counter() - started
    changed = source.version - version
    source.stop()
    return calls, took, changed, kept


def best_of_three(run) -> tuple[float, int]:
    times, count = [], 0
    for _ in range(3):
        started = time.perf_counter()
        count = run()
        times.append(time.perf_counter() - started)
    return min(times), count


def cloud_listing(kind: str, objects: int) -> None:
    """One store's listing by the source against its official client's paginator (the
    module docstring), printed."""
    from kube_workqueue.ambassador.sources.registry import resolve, source_type
    from tests.support.buckets import Azurite, GcsEmulator

    store = GcsEmulator() if kind == "gcs" else Azurite()
    try:
        os.environ.update(store.env)
        bucket = store.bucket()
        print(f"{kind}: filling a bucket with {objects:,} objects ...", flush=True)
        filled = time.perf_counter()
        store.fill(bucket, (f"videos-{i:07d}.mp4" for i in range(objects)))
        print(f"  (filled in {time.perf_counter() - filled:.0f} s)", flush=True)
        spec = resolve(store.url(bucket), {"SUFFIXES": [".mp4"], "POLL_INTERVAL": 3600})
        source = source_type(spec.kind).open(spec.config)
        source.start()
        lister = source.lister
        if kind == "gcs":
            from kube_workqueue.ambassador.sources import gcs

            def floor() -> int:
                blobs = lister.client.list_blobs(bucket, delimiter="/", page_size=gcs.PAGE_SIZE)
                return sum(1 for _ in blobs)

            client = "google-cloud-storage's list_blobs"
        else:
            from kube_workqueue.ambassador.sources import azure_blob

            def floor() -> int:
                blobs = lister.container.walk_blobs(
                    delimiter="/", results_per_page=azure_blob.PAGE_SIZE
                )
                return sum(1 for _ in blobs)

            client = "azure-storage-blob's walk_blobs"

        def ours() -> int:
            source._relist()
            return len(source.page(None, None)[0]) if objects <= 1000 else objects

        floor_s, seen = best_of_three(floor)
        assert seen == objects, seen
        ours_s, _ = best_of_three(ours)
        assert source.ready(), source.problem
        source.stop()
        print(
            f"  {objects:,} objects: {client} lists them in {floor_s:.2f} s (the floor); the "
            f"source's whole re-listing {ours_s:.2f} s: {ours_s / floor_s:.2f}x (goal <= 1.1x)"
        )
    finally:
        store.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--stores", default="s3,gcs,azure",
                        help="which stores, comma-separated (s3, gcs, azure)")  # fmt: skip
    args = parsed(parser, {"objects": 100})  # (one object is read by name: videos-0000042.mp4)
    stores = args.stores.split(",")
    for kind in ("gcs", "azure"):
        if kind in stores:
            cloud_listing(kind, args.objects)
    if "s3" not in stores:
        return
    store = ObjectStore()
    procs: list[subprocess.Popen] = []
    try:
        empty = store.bucket()
        proc, _, _ = start(store, empty, 0, poll="1")
        time.sleep(1)
        base_rss = rss_tree_mb(proc.pid)
        proc.terminate()
        proc.wait(10)

        bucket = store.bucket()
        print(f"filling a bucket with {args.objects:,} objects ...", flush=True)
        store.fill(bucket, (f"videos-{i:07d}.mp4" for i in range(args.objects)))
        floor, seen = floor_seconds(store, bucket)
        assert seen == args.objects, seen
        proc, base, cold = start(store, bucket, args.objects, poll="1")
        procs.append(proc)
        for _ in range(4):  # both workers have read the published version
            requests.get(base + "/api/v1/items", timeout=120)
        time.sleep(1)
        rss = rss_tree_mb(proc.pid)
        per_item = (rss - base_rss) * 1024 * 1024 / args.objects
        relisting = time.perf_counter() + 2.5 * floor  # two listings and more, back to back
        highest = rss
        while time.perf_counter() < relisting:
            requests.get(base + "/api/v1/items", timeout=120)
            highest = max(highest, rss_tree_mb(proc.pid))
            time.sleep(0.5)
        highest_per_item = (highest - base_rss) * 1024 * 1024 / args.objects
        print(
            f"{args.objects:,} objects: boto3's paginator lists them in {floor:.2f} s (the "
            f"floor); the ambassador's cold start, launch to every object listed, {cold:.2f} s: "
            f"{cold / floor:.2f}x the floor (goal <= 2x)"
        )
        print(
            f"RSS {rss:.0f} MB, {base_rss:.0f} MB on an empty bucket: {per_item:.0f} B per item "
            f"(goal <= 300 B); at most {highest:.0f} MB ({highest_per_item:.0f} B per item) "
            f"while it was listed again and again for {2.5 * floor:.0f} s"
        )
        data = requests.get(base + "/api/v1/items/videos-0000042.mp4", timeout=10).json()
        assert data["data"]["key"] == "videos-0000042.mp4", data
        proc.terminate()  # its listings would share moto with the next part's
        proc.wait(10)
        calls, took, changed, kept = quiet_poll(store, bucket)
        print(
            f"of which the live source keeps {kept / args.objects:.0f} B per item (tracemalloc, "
            "in one process); the rest is each worker's copy and what the allocator keeps"
        )
        pages = calls.get("ListObjectsV2", 0)
        others = sum(n for op, n in calls.items() if op != "ListObjectsV2")
        cost = pages * LIST_PRICE_PER_1000 / 1000
        print(
            f"a poll with nothing new: {pages} ListObjectsV2 pages, {others} per-object "
            f"requests, {took:.2f} s here, {changed} listing changes; at S3's list price "
            f"${cost:.4f} a poll, ${cost * 8640:.2f} a day at the default 10 s interval"
        )
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)
        store.stop()


if __name__ == "__main__":
    main()
