"""``arcs local`` as a process: redrive of a poison message to the DLQ, and a clean stop on SIGTERM."""

from __future__ import annotations

import json
import time

import boto3
import pytest

from tests.e2e.servers import Client, local

pytestmark = pytest.mark.e2e


def test_poison_message_reaches_the_dlq_and_sigterm_stops_cleanly() -> None:
    server = local(ARCS_LOCAL_MAX_RECEIVE_COUNT="1", ARCS_LOCAL_VISIBILITY_TIMEOUT_S="1").start()
    try:
        (line,) = [line for line in server.output if line.startswith('{"event": "emulator"')]
        emulator = json.loads(line)
        sqs = boto3.client(
            "sqs",
            endpoint_url=emulator["endpoint"],
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        poison = sqs.send_message(QueueUrl=emulator["queue_url"], MessageBody="{not a write")["MessageId"]
        client = Client(server.url)
        assert client.write("/api/v1/write/line-protocol", b"alive v=1i 1700000000000000000").status_code == 204
        assert client.wait_count("alive", 1, timeout=15) == 1
        client.http.close()
        dead: list[str] = []
        deadline = time.monotonic() + 15
        while not dead and time.monotonic() < deadline:
            messages = sqs.receive_message(QueueUrl=emulator["dlq_url"], WaitTimeSeconds=1).get("Messages", [])
            dead = [message["MessageId"] for message in messages]
        sqs.close()
        assert dead == [poison]
    finally:
        started = time.monotonic()
        server.stop()
    assert server.process is not None and server.process.returncode == 0, "".join(server.output)
    assert time.monotonic() - started < 10
    assert any("emulation stopped" in line for line in server.output), "".join(server.output)
