#!/usr/bin/env python3
"""A delivery receiver that verifies fermata's signatures with the standard library alone.

    WEBHOOK_SECRETS=whsec_... python receiver.py --port 9000

fermata signs each delivery as Standard Webhooks specifies when it runs with signing secrets
(FERMATA_SIGNING_SECRETS or "dispatch": {"signing_secrets"}): `webhook-id` (the timer's id),
`webhook-timestamp` (the attempt's time, epoch seconds) and `webhook-signature`, a
space-separated list of `v1,<base64 HMAC-SHA256>` entries, one per secret it signs with, over
`{webhook-id}.{webhook-timestamp}.{body}`. `verify()` is the part to keep: it accepts a delivery
when the timestamp is within five minutes of this machine's clock and any v1 entry matches any
of the receiver's secrets (so either side can rotate: sign or accept old and new for a while).
This receiver answers 204 to a verified delivery and 401 to anything else (fermata retries a
refused attempt), and treats a webhook-id it has seen as done, since delivery is at least once
(it remembers them in memory; a real one would keep them with the work they caused).
"""
import argparse
import base64
import binascii
import hashlib
import hmac
import logging
import os
import sys
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET_PREFIX = "whsec_"
TOLERANCE_S = 5 * 60
# One whole line a delivery, also when deliveries arrive together on several threads.
log = logging.getLogger("receiver")


class VerificationError(Exception):
    pass


def secret_key(secret: str) -> bytes:
    """The HMAC key of a Standard Webhooks secret: the base64 after "whsec_" (padding optional)."""
    text = secret.removeprefix(SECRET_PREFIX)
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except binascii.Error as err:
        raise ValueError(f"a signing secret is {SECRET_PREFIX} followed by base64") from err


def verify(keys: list[bytes], headers: Mapping[str, str], body: bytes, now: float | None = None) -> str:
    """The delivery's webhook-id if it is signed by one of `keys`; else raises VerificationError.

    `headers` is looked up by lower-case name (http.server's headers are case-insensitive).
    """
    msg_id, timestamp, signature = (headers.get(name) for name in ("webhook-id", "webhook-timestamp", "webhook-signature"))
    if not msg_id or not timestamp or not signature:
        raise VerificationError("missing webhook-id, webhook-timestamp or webhook-signature")
    if not timestamp.isascii() or not timestamp.isdigit():
        raise VerificationError(f"webhook-timestamp {timestamp!r} is not epoch seconds")
    skew = int(timestamp) - (time.time() if now is None else now)
    if abs(skew) > TOLERANCE_S:
        raise VerificationError(f"webhook-timestamp is {abs(skew):.0f} s {'ahead' if skew > 0 else 'old'}, more than {TOLERANCE_S} s")
    signed = f"{msg_id}.{timestamp}.".encode() + body
    expected = [base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()) for key in keys]
    for entry in signature.split(" "):
        version, _, value = entry.partition(",")
        if version == "v1" and any(hmac.compare_digest(value.encode(), candidate) for candidate in expected):
            return msg_id
    raise VerificationError("no v1 signature matches a secret")


class Receiver(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: fermata sends a target's deliveries on one connection
    keys: list[bytes] = []
    seen: set[str] = set()
    seen_lock = threading.Lock()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        try:
            msg_id = verify(self.keys, self.headers, body)
        except VerificationError as err:
            log.info("refused: %s", err)
            self.send_response(401)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        with self.seen_lock:
            repeat = msg_id in self.seen
            self.seen.add(msg_id)
        if repeat:
            log.info("repeat %s: already handled", msg_id)
        else:
            log.info("delivered %s attempt %s: %s", msg_id, self.headers.get("fermata-attempt"), body.decode(errors="replace"))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass  # the line a delivery logs above is enough


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000, help="0 picks a free one")
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
    secrets = os.environ.get("WEBHOOK_SECRETS", "").replace(",", " ").split()
    if not secrets:
        sys.exit("set WEBHOOK_SECRETS to the service's signing secret(s), whsec_..., separated by spaces or commas")
    Receiver.keys = [secret_key(secret) for secret in secrets]
    server = ThreadingHTTPServer((args.host, args.port), Receiver)
    log.info("listening on http://%s:%d", args.host, server.server_port)
    server.serve_forever()


if __name__ == "__main__":
    main()
