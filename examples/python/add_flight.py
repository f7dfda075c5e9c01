#!/usr/bin/env python3
"""Add timers over Arrow Flight: a DoPut of record batches to a service started with --flight.

    python add_flight.py --flight grpc+tcp://127.0.0.1:7071 --target http://127.0.0.1:9000/hook --count 1000

`put_timers(client, table, queue)` is the part to keep: it streams the table's record batches
(columns named like a timer's fields) on one DoPut call, to the descriptor ["timers"] or
["timers", QUEUE], and reads one PutResult a batch, each sent once that batch is durable. With
the call header `fermata-ids: arrow` each PutResult carries an Arrow stream with every row's
`id`, `duplicate`, `state` and `differs`; the ids come back in the table's order. A batch is
admitted alone: a refused one fails the call with the service's message, and the batches before
it stay added (send keys to make a resend of the whole table harmless).
"""
import argparse
import os
import sys
import time

import pyarrow as pa
import pyarrow.flight as flight

# At most 100,000 rows a batch (docs/api.md, "Arrow Flight": as for POST /v1/timers).
ROWS_PER_BATCH = 50_000


def put_timers(client: flight.FlightClient, table: pa.Table, queue: str | None = None, token: str | None = None) -> list[str]:
    headers = [(b"fermata-ids", b"arrow")]
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    path = ["timers"] if queue is None else ["timers", queue]
    batches = table.to_batches(max_chunksize=ROWS_PER_BATCH)
    writer, reader = client.do_put(flight.FlightDescriptor.for_path(*path), table.schema, flight.FlightCallOptions(headers=headers))
    for batch in batches:
        writer.write_batch(batch)
    writer.done_writing()
    ids: list[str] = []
    for _ in batches:
        answer = pa.ipc.open_stream(reader.read()).read_all()
        ids.extend(answer.column("id").to_pylist())
    writer.close()
    return ids


def demo_table(target: str, count: int, in_seconds: float) -> pa.Table:
    fire_at_ms = int((time.time() + in_seconds) * 1000)
    return pa.table({
        "fire_at": pa.array([fire_at_ms] * count, type=pa.timestamp("ms", tz="UTC")),
        "target": pa.array([target] * count, type=pa.string()),
        "payload": pa.array([f'{{"invoice": {i}}}' for i in range(count)], type=pa.string()),
        "key": pa.array([f"flight-demo-{i}" for i in range(count)], type=pa.string()),
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--flight", default=os.environ.get("FERMATA_FLIGHT_URL", "grpc+tcp://127.0.0.1:7071"), help="the service's Flight port (default $FERMATA_FLIGHT_URL or grpc+tcp://127.0.0.1:7071)")
    parser.add_argument("--target", required=True, metavar="URL", help="where the timers are delivered")
    parser.add_argument("--queue", help="the queue they join (default: default)")
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--in-seconds", type=float, default=5.0, help="when they are due, from now")
    args = parser.parse_args()
    table = demo_table(args.target, args.count, args.in_seconds)
    try:
        ids = put_timers(flight.FlightClient(args.flight), table, args.queue, os.environ.get("FERMATA_TOKEN"))
    except flight.FlightError as err:
        sys.exit(f"refused: {err}")
    for row_id in ids:
        print(row_id)


if __name__ == "__main__":
    main()
