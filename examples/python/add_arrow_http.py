#!/usr/bin/env python3
"""Add timers from a pyarrow table: POST /v1/timers with the table as an Arrow IPC stream.

    python add_arrow_http.py --target http://127.0.0.1:9000/hook --count 1000
    python add_arrow_http.py --parquet timers.parquet

`post_timers(session, url, table)` is the part to keep: it sends any pyarrow table whose columns
are named like a timer's fields (fire_at, target, payload, key, queue, headers, ...) in slices
that fit the limits the service reports (GET /v1/limits: rows a batch, bytes a batch), waits out
a 429 or 503 as the service's Retry-After says, and returns every row's id in the table's order.
Each slice is accepted whole (once durable) or refused whole, and rows with a `key` make a
resend harmless: a known key adds nothing and answers the original timer's id. `post_batches`
does the same for record batches as they come, such as a Parquet file's read a batch at a time
(`--parquet`), so a file larger than memory streams through. The demo table is `--count` timers
due `--in-seconds` from now, keyed `demo-{i}`.
"""
import argparse
import os
import sys
import time
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.parquet as pq
import requests

ARROW_STREAM = "application/vnd.apache.arrow.stream"
# Rows read from a Parquet file at a time (each read batch is then cut to the service's limits).
READ_BATCH_ROWS = 50_000
# How often one request is sent in all while the service answers 429 or 503.
ATTEMPTS_PER_REQUEST = 5


class FermataError(Exception):
    """A refusal from the service: its error code and message, as its JSON error body says."""


def arrow_stream(rows: pa.Table | pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema) as writer:
        writer.write(rows)
    return sink.getvalue().to_pybytes()


def post_timers(session: requests.Session, url: str, table: pa.Table) -> list[str]:
    """Adds every row of `table` as a timer; returns the ids, row-aligned (a duplicate's is its original's)."""
    return post_batches(session, url, [table])


def post_batches(session: requests.Session, url: str, pieces: Iterable[pa.Table | pa.RecordBatch]) -> list[str]:
    """Adds the rows of each piece in order, cut into requests the service takes; returns every row's id."""
    limits = session.get(f"{url}/v1/limits")
    limits.raise_for_status()
    rows_max = limits.json()["batch_rows_max"]
    # A batch as logged holds more than its columns' bytes (ids, times, framing): aim at half.
    bytes_max = limits.json()["batch_logged_bytes_max"] // 2
    ids: list[str] = []
    for piece in pieces:
        rows = max(1, min(rows_max, piece.num_rows * bytes_max // max(1, piece.nbytes)))
        for start in range(0, piece.num_rows, rows):
            ids.extend(post_request(session, url, piece.slice(start, rows), len(ids)))
    return ids


def post_request(session: requests.Session, url: str, rows: pa.Table | pa.RecordBatch, offset: int) -> list[str]:
    """One POST /v1/timers of `rows` (the rows from `offset` on, for error messages); their ids."""
    body = arrow_stream(rows)
    for attempt in range(1, ATTEMPTS_PER_REQUEST + 1):
        answer = session.post(f"{url}/v1/timers", data=body, headers={"content-type": ARROW_STREAM, "accept": "application/json"})
        if answer.status_code in (429, 503) and attempt < ATTEMPTS_PER_REQUEST:
            time.sleep(float(answer.headers.get("retry-after", "1")))
            continue
        break
    if answer.status_code != 201:
        error = answer.json().get("error", {}) if answer.headers.get("content-type", "").startswith("application/json") else {}
        raise FermataError(f"rows {offset} to {offset + rows.num_rows - 1}: {answer.status_code} {error.get('code')}: {error.get('message', answer.text)}")
    return answer.json()["ids"]


def session_for(token: str | None) -> requests.Session:
    session = requests.Session()
    if token:
        session.headers["authorization"] = f"Bearer {token}"
    return session


def demo_table(target: str, count: int, in_seconds: float) -> pa.Table:
    fire_at_ms = int((time.time() + in_seconds) * 1000)
    return pa.table({
        "fire_at": pa.array([fire_at_ms] * count, type=pa.timestamp("ms", tz="UTC")),
        "target": pa.array([target] * count, type=pa.string()),
        "payload": pa.array([f'{{"order": {i}}}' for i in range(count)], type=pa.string()),
        "key": pa.array([f"demo-{i}" for i in range(count)], type=pa.string()),
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=os.environ.get("FERMATA_URL", "http://127.0.0.1:7070"), help="the service (default $FERMATA_URL or http://127.0.0.1:7070)")
    parser.add_argument("--parquet", metavar="FILE", help="a Parquet file of timers to send, a batch at a time, instead of the demo table")
    parser.add_argument("--target", metavar="URL", help="where the demo timers are delivered")
    parser.add_argument("--count", type=int, default=3, help="how many demo timers")
    parser.add_argument("--in-seconds", type=float, default=5.0, help="when the demo timers are due, from now")
    args = parser.parse_args()
    if (args.parquet is None) == (args.target is None):
        parser.error("give --parquet FILE, or --target URL for the demo table")
    session = session_for(os.environ.get("FERMATA_TOKEN"))
    try:
        if args.parquet is not None:
            ids = post_batches(session, args.url, pq.ParquetFile(args.parquet).iter_batches(batch_size=READ_BATCH_ROWS))
        else:
            ids = post_timers(session, args.url, demo_table(args.target, args.count, args.in_seconds))
    except FermataError as err:
        sys.exit(f"refused: {err}")
    for row_id in ids:
        print(row_id)


if __name__ == "__main__":
    main()
