#!/usr/bin/python3
"""A WebSocket client for the upgrade tests (Debian's python3-websockets). Runs one scenario
against a URL and prints a JSON line with what it saw, last; exits 0 unless the scenario failed.

  exchange --seconds S --interval-ms I [--size B]
      sends a message every I ms for S seconds (B bytes each, default small), checks each echo, then
      closes (1000 "client done"): {"sent", "echoed", "close_code", "close_s"}, close_s the time
      the close took: its handshake, then the server's TCP close passed on by the proxy
  server-close
      sends "close-me": {"close_code", "close_reason", "close_s"} as the client received them,
      close_s until the connection was closed (the server closes TCP after the handshake)
  idle --seconds S
      one echo (then prints {"echoed": true}), then silence until the connection closes or S
      seconds pass: {"closed_after_s", "close_code"}
  push --count N
      reads N unasked messages: {"received"}
  volume --mib M --size B
      sends M MiB in B-byte binary messages, 16 in flight, each echo checked:
      {"bytes", "echoed_bytes"}
close_timeout is 5 s: a close whose TCP end is not passed on takes that long.
"""
import argparse
import asyncio
import json
import os
import ssl
import sys
import time

import websockets


def result(**fields):
    print(json.dumps(fields), flush=True)


async def run(args):
    context = None
    if args.url.startswith("wss:"):
        context = ssl.create_default_context(cafile=args.ca)
    async with websockets.connect(args.url, ssl=context, ping_interval=None, max_size=None,
                                  close_timeout=5, open_timeout=10) as ws:
        if args.scenario == "exchange":
            sent = echoed = 0
            deadline = time.monotonic() + args.seconds
            payload = "x" * args.size
            while time.monotonic() < deadline:
                message = f"{sent} {payload}"
                await ws.send(message)
                sent += 1
                if await asyncio.wait_for(ws.recv(), 5) == message:
                    echoed += 1
                await asyncio.sleep(args.interval_ms / 1000)
            closing = time.monotonic()
            await ws.close(1000, "client done")
            result(sent=sent, echoed=echoed, close_code=ws.close_code, close_s=time.monotonic() - closing)
            return sent == echoed and sent > 0
        if args.scenario == "server-close":
            closing = time.monotonic()
            await ws.send("close-me")
            try:
                await asyncio.wait_for(ws.recv(), 10)
            except websockets.ConnectionClosed:
                pass
            await asyncio.wait_for(ws.wait_closed(), 10)
            result(close_code=ws.close_code, close_reason=ws.close_reason, close_s=time.monotonic() - closing)
            return True
        if args.scenario == "idle":
            await ws.send("hello")
            await asyncio.wait_for(ws.recv(), 5)
            result(echoed=True)  # the tunnel is open: a test may now act on it
            started = time.monotonic()
            try:
                await asyncio.wait_for(ws.recv(), args.seconds)
                result(error="a message came")
                return False
            except websockets.ConnectionClosed:
                result(closed_after_s=time.monotonic() - started, close_code=ws.close_code)
                return True
            except asyncio.TimeoutError:
                result(closed_after_s=None, close_code=None)
                return False
        if args.scenario == "push":
            received = 0
            for _ in range(args.count):
                if (await asyncio.wait_for(ws.recv(), 5)).startswith("push "):
                    received += 1
            result(received=received)
            return received == args.count
        if args.scenario == "volume":
            total = args.mib * 1024 * 1024
            payload = os.urandom(args.size)
            sent = echoed = 0
            window = 16
            while sent < total:
                batch = min(window, (total - sent + args.size - 1) // args.size)
                for _ in range(batch):
                    await ws.send(payload)
                    sent += len(payload)
                for _ in range(batch):
                    answer = await asyncio.wait_for(ws.recv(), 10)
                    if answer == payload:
                        echoed += len(answer)
            await ws.close()
            result(bytes=sent, echoed_bytes=echoed)
            return sent == echoed
    return False


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=["exchange", "server-close", "idle", "push", "volume"])
    parser.add_argument("url")
    parser.add_argument("--ca")
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--interval-ms", type=float, default=100)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--mib", type=int, default=64)
    args = parser.parse_args()
    try:
        ok = asyncio.run(run(args))
    except Exception as error:  # the test prints it
        result(error=f"{type(error).__name__}: {error}")
        ok = False
    sys.exit(0 if ok else 1)


main()
