#!/usr/bin/env python3
"""Add timers from a pyarrow table: POST /v1/timers with the table as an Arrow IPC stream.

    python add_arrow_http.py --target http://127.0.0.1:9000/hook --count 1000

`post_timers(session, url, table)` is the part to keep: it sends any pyarrow table whose columns
are named like a timer's fields (fire_at, target, payload, key, queue, headers, ...) in slices of
at most ROWS_PER_REQUEST rows, waits out a 429 or 503 as the service's Retry-After says, and
returns every row's id in the table's order. Each slice is accepted whole (once durable) or
refused whole, and rows with a `key` make a resend harmless: a known key adds nothing and
answers the original timer's id. The demo table here is `--count` timers due `--in-seconds`
from now, keyed `demo-{i}`.
"""
import argparse
import os
import sys
import time

import pyarrow as pa
import requests

ARROW_STREAM = "application/vnd.apache.arrow.stream"
# A request takes 1 to 100,000 timers and at most 64 MiB (docs/api.md, "Adding timers"); half the
# row limit leaves room for payloads of a few hundred bytes a row.
ROWS_PER_REQUEST = 50_000
# How often one slice is sent again after a 429 or 503 before giving up.
ATTEMPTS_PER_SLICE = 5


class FermataError(Exception):
    """A refusal from the service: its error code and message, as its JSON error body says."""


def arrow_stream(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def post_timers(session: requests.Session, url: str, table: pa.Table) -> list[str]:
    """Adds every row of `table` as a timer; returns the ids, row-aligned (a duplicate's is its original's)."""
    ids: list[str] = []
    for offset in range(0, table.num_rows, ROWS_PER_REQUEST):
        body = arrow_stream(table.slice(offset, ROWS_PER_REQUEST))
        for attempt in range(1, ATTEMPTS_PER_SLICE + 1):
            answer = session.post(f"{url}/v1/timers", data=body, headers={"content-type": ARROW_STREAM, "accept": "application/json"})
            if answer.status_code in (429, 503) and attempt < ATTEMPTS_PER_SLICE:
                time.sleep(float(answer.headers.get("retry-after", "1")))
                continue
            break
        if answer.status_code != 201:
            error = answer.json().get("error", {}) if answer.headers.get("content-type", "").startswith("application/json") else {}
            raise FermataError(f"rows {offset}+: {answer.status_code} {error.get('code')}: {error.get('message', answer.text)}")
        ids.extend(answer.json()["ids"])
    return ids


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
    parser.add_argument("--target", required=True, help="where the timers are delivered")
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--in-seconds", type=float, default=5.0, help="when they are due, from now")
    args = parser.parse_args()
    table = demo_table(args.target, args.count, args.in_seconds)
    try:
        ids = post_timers(session_for(os.environ.get("FERMATA_TOKEN")), args.url, table)
    except FermataError as err:
        sys.exit(f"refused: {err}")
    for row_id in ids:
        print(row_id)


if __name__ == "__main__":
    main()
