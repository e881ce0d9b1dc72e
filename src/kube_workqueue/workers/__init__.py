"""The worker programs the wheel ships: each a standalone program of the Python standard library
(boto3 only for `s3://`), run once per item by the manager, never imported by it.

    fetch_run_put.py   the generic worker: download an object, run a user script on it, upload
                       the result (console script `fetch-run-put`); its transfers in and
                       out, and its one-line failures, in transfers.py
    thumbnail.py       the example thumbnailer: one video in, one PNG out (console script
                       `workqueue-thumbnail`)

The repository's worker-images/ name them by the paths the images always had
(worker-images/generic/fetch-run-put, worker-images/thumbnailer/thumbnail: links to these
files), so a checkout runs them without installing anything; an image installs the wheel and runs
the console script. Nothing here imports the manager or the ambassador, and a worker reads only
the item's file and its environment: the contract of `WORK_ITEM_FILE` in docs/running.md.
"""
