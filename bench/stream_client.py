#!/usr/bin/env python3
"""bench/stream_client.py: the streaming scenarios' client (bench/streaming.sh drives it).

One process, one asyncio loop, HTTP/1.1 over plain sockets, one request per connection. Every
response is verified, and the figures come out as one JSON object on stdout:

  download --url URL --size N [--concurrency C]
      C concurrent GETs of URL?size=N (idem-stream-upstream's /download); each body must be
      exactly N bytes of the pattern (byte i is i % 251), checked byte for byte as it arrives
      (Content-Length or chunked).
  upload --url URL --size N [--concurrency C]
      C concurrent PUTs of N pattern bytes with a Content-Length; the upstream's answer
      {"bytes": n, "sha256": hex} must name N and the pattern's SHA-256.
  sse --url URL --streams S --events E --interval-ms M
      S concurrent GETs of URL?events=E&interval_ms=M (the upstream writes "data: <n> <CLOCK_MONOTONIC
      ns>" every M ms; the streams start spread over one interval); every stream must deliver
      events 1..E in order, then its end. Each event's
      latency is its receipt (time.monotonic_ns, the same clock) minus the upstream's timestamp.

Throughput is the bytes moved divided by the time from the first connection opened to the last
answer verified. --timeout bounds the whole phase (default 300 s): what is not done by then is an
error. Exits 1 when any response failed verification.
"""

import argparse
import asyncio
import hashlib
import json
import sys
import time

PERIOD = 251
READ_SIZE = 1 << 20
# Bytes [k, k + n) of this are bytes [o, o + n) of the pattern whenever o % 251 == k: any slice
# of a body up to READ_SIZE bytes long is compared against one slice of it.
PATTERN = bytes(i % PERIOD for i in range(PERIOD)) * (READ_SIZE // PERIOD + 2)
# Upload pieces start at a pattern offset that is a multiple of 251: each piece is the same bytes.
UPLOAD_PIECE = PATTERN[: (READ_SIZE // PERIOD) * PERIOD]


class Failure(Exception):
    pass


def split_url(url):
    if not url.startswith("http://"):
        raise SystemExit("only http:// URLs")
    rest = url[len("http://"):]
    hostport, _, path = rest.partition("/")
    host, _, port = hostport.partition(":")
    return host, int(port or 80), "/" + path


async def read_head(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise Failure(f"bad status line {lines[0]!r}")
    headers = {}
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


async def body_pieces(reader, headers):
    """Yields the body's bytes as they arrive: by Content-Length, chunked, or to the close."""
    coding = headers.get("transfer-encoding", "").lower()
    if coding.endswith("chunked"):
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers, then the blank line
                    pass
                return
            while size > 0:
                piece = await reader.read(min(size, READ_SIZE))
                if not piece:
                    raise Failure("connection closed inside a chunk")
                size -= len(piece)
                yield piece
            if await reader.readexactly(2) != b"\r\n":
                raise Failure("chunk not followed by CRLF")
    elif "content-length" in headers:
        left = int(headers["content-length"])
        while left > 0:
            piece = await reader.read(min(left, READ_SIZE))
            if not piece:
                raise Failure(f"connection closed {left} bytes short of the Content-Length")
            left -= len(piece)
            yield piece
    else:
        while True:
            piece = await reader.read(READ_SIZE)
            if not piece:
                return
            yield piece


async def connect(host, port):
    return await asyncio.open_connection(host, port, limit=4 * READ_SIZE)


def request_head(method, host, port, target, extra=""):
    return f"{method} {target} HTTP/1.1\r\nHost: {host}:{port}\r\n{extra}Connection: close\r\n\r\n".encode()


async def close(writer):
    writer.close()
    try:
        await writer.wait_closed()
    except (ConnectionError, OSError):
        pass


async def one_download(host, port, target, size):
    reader, writer = await connect(host, port)
    try:
        writer.write(request_head("GET", host, port, target))
        status, headers = await read_head(reader)
        if status != 200:
            raise Failure(f"status {status}")
        offset = 0
        async for piece in body_pieces(reader, headers):
            start = offset % PERIOD
            if piece != PATTERN[start:start + len(piece)]:
                raise Failure(f"body differs from the pattern within bytes {offset}..{offset + len(piece)}")
            offset += len(piece)
        if offset != size:
            raise Failure(f"body of {offset} bytes, expected {size}")
        return offset
    finally:
        await close(writer)


def pattern_sha256(size):
    digest = hashlib.sha256()
    left = size
    while left > 0:
        take = min(left, len(UPLOAD_PIECE))
        digest.update(UPLOAD_PIECE[:take] if take < len(UPLOAD_PIECE) else UPLOAD_PIECE)
        left -= take
    return digest.hexdigest()


async def one_upload(host, port, target, size, expected_sha):
    reader, writer = await connect(host, port)
    try:
        writer.write(request_head("PUT", host, port, target,
                                  f"Content-Type: application/octet-stream\r\nContent-Length: {size}\r\n"))
        left = size
        piece = memoryview(UPLOAD_PIECE)
        while left > 0:
            take = min(left, len(piece))
            writer.write(piece[:take])
            left -= take
            await writer.drain()
        status, headers = await read_head(reader)
        body = b"".join([p async for p in body_pieces(reader, headers)])
        if status != 200:
            raise Failure(f"status {status}: {body[:200]!r}")
        answer = json.loads(body)
        if answer.get("bytes") != size or answer.get("sha256") != expected_sha:
            raise Failure(f"the upstream received {answer}, expected {size} bytes with SHA-256 {expected_sha}")
        return size
    finally:
        await close(writer)


async def one_sse(host, port, target, events, latencies, delay):
    # Streams start spread over one interval, so their events are too (as independent feeds'
    # are), rather than all streams' n-th events landing in the same millisecond.
    await asyncio.sleep(delay)
    reader, writer = await connect(host, port)
    try:
        writer.write(request_head("GET", host, port, target, "Accept: text/event-stream\r\n"))
        status, headers = await read_head(reader)
        if status != 200:
            raise Failure(f"status {status}")
        pending = b""
        expected = 1
        received = 0
        async for piece in body_pieces(reader, headers):
            now = time.monotonic_ns()
            pending += piece
            while True:
                end = pending.find(b"\n\n")
                if end < 0:
                    break
                event, pending = pending[:end], pending[end + 2:]
                fields = event.split()
                if len(fields) != 3 or fields[0] != b"data:" or int(fields[1]) != expected:
                    raise Failure(f"event {event[:80]!r}, expected number {expected}")
                latencies.append(now - int(fields[2]))
                expected += 1
                received += len(event) + 2
        if expected != events + 1 or pending:
            raise Failure(f"{expected - 1} of {events} events, then the end")
        return received
    finally:
        await close(writer)


def percentile(sorted_values, fraction):
    if not sorted_values:
        return None
    index = min(len(sorted_values) - 1, max(0, int(round(fraction * len(sorted_values) + 0.5)) - 1))
    return sorted_values[index]


async def run(args):
    host, port, path = split_url(args.url)
    latencies = []
    if args.mode == "download":
        target = f"{path}?size={args.size}"
        jobs = [one_download(host, port, target, args.size) for _ in range(args.concurrency)]
    elif args.mode == "upload":
        expected_sha = pattern_sha256(args.size)
        jobs = [one_upload(host, port, path, args.size, expected_sha) for _ in range(args.concurrency)]
    else:
        target = f"{path}?events={args.events}&interval_ms={args.interval_ms}"
        spread = args.interval_ms / 1000 / args.streams
        jobs = [one_sse(host, port, target, args.events, latencies, i * spread) for i in range(args.streams)]
    started = time.monotonic()
    try:
        outcomes = await asyncio.wait_for(asyncio.gather(*jobs, return_exceptions=True), args.timeout)
    except asyncio.TimeoutError:
        outcomes = [Failure(f"not done within {args.timeout} s")] * len(jobs)
    seconds = time.monotonic() - started
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    moved = sum(o for o in outcomes if not isinstance(o, BaseException))
    result = {
        "mode": args.mode,
        "requests": len(jobs),
        "verified": len(jobs) - len(failures),
        "errors": len(failures),
        "first_errors": sorted({f"{type(f).__name__}: {f}" for f in failures})[:5],
        "bytes": moved,
        "seconds": round(seconds, 4),
        "mib_per_s": round(moved / seconds / (1 << 20), 1) if seconds > 0 else None,
    }
    if args.mode in ("download", "upload"):
        result.update(size=args.size, concurrency=args.concurrency)
    else:
        latencies.sort()
        result.update(streams=args.streams, events_per_stream=args.events, interval_ms=args.interval_ms,
                      events_expected=args.streams * args.events, events_received=len(latencies),
                      latency_us={"p50": round(percentile(latencies, 0.5) / 1000, 1) if latencies else None,
                                  "p99": round(percentile(latencies, 0.99) / 1000, 1) if latencies else None,
                                  "max": round(latencies[-1] / 1000, 1) if latencies else None})
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["download", "upload", "sse"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--events", type=int, default=10)
    parser.add_argument("--interval-ms", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    result = asyncio.run(run(args))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0 if result["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
