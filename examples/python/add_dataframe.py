#!/usr/bin/env python3
"""Add timers from a pandas DataFrame: one row a timer, sent as Arrow to POST /v1/timers.

    python add_dataframe.py --target http://127.0.0.1:9000/hook

A DataFrame becomes a pyarrow table with an explicit schema, so each column has the Arrow type
the service reads (pandas' own string and datetime types vary with its version and options),
and is sent by add_arrow_http.post_timers (beside this file) in slices, with its retries. The
demo frame is a few reminders, one a customer, due `--in-seconds` from now; the ids are printed
beside the customers.
"""
import argparse
import json
import os
import sys

import pandas as pd
import pyarrow as pa

from add_arrow_http import FermataError, post_timers, session_for

# Columns named like a timer's fields; fire_at of any Timestamp unit, here pandas' nanoseconds.
TIMER_SCHEMA = pa.schema([
    ("fire_at", pa.timestamp("ns", tz="UTC")),
    ("target", pa.string()),
    ("payload", pa.string()),
    ("key", pa.string()),
])


def add_dataframe(url: str, frame: pd.DataFrame, token: str | None = None) -> list[str]:
    table = pa.Table.from_pandas(frame[TIMER_SCHEMA.names], schema=TIMER_SCHEMA, preserve_index=False)
    return post_timers(session_for(token), url, table)


def demo_frame(target: str, in_seconds: float) -> pd.DataFrame:
    customers = pd.DataFrame({"customer": ["ada", "grace", "edsger"], "plan": ["pro", "team", "pro"]})
    return customers.assign(
        fire_at=pd.Timestamp.now(tz="UTC") + pd.Timedelta(seconds=in_seconds),
        target=target,
        payload=[json.dumps({"remind": customer, "plan": plan}) for customer, plan in zip(customers["customer"], customers["plan"])],
        key="trial-ends:" + customers["customer"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=os.environ.get("FERMATA_URL", "http://127.0.0.1:7070"), help="the service (default $FERMATA_URL or http://127.0.0.1:7070)")
    parser.add_argument("--target", required=True, metavar="URL", help="where the timers are delivered")
    parser.add_argument("--in-seconds", type=float, default=5.0, help="when they are due, from now")
    args = parser.parse_args()
    frame = demo_frame(args.target, args.in_seconds)
    try:
        frame["timer_id"] = add_dataframe(args.url, frame, os.environ.get("FERMATA_TOKEN"))
    except FermataError as err:
        sys.exit(f"refused: {err}")
    print(frame[["customer", "timer_id"]].to_string(index=False))


if __name__ == "__main__":
    main()
