#!/usr/bin/python3
"""A WebSocket server for the upgrade tests (Debian's python3-websockets), run as the proxy's
upstream: binds 127.0.0.1 port 0 (TLS with --cert/--key) and prints "listening 127.0.0.1:<port>".

  /echo            every message is sent back; "close-me" makes the server close (4001 "bye")
  /push?n=&ms=     n text messages, one every ms milliseconds, unasked, then the echo loop
  /not-upgraded    answered 200 "not upgraded" without switching (an upstream that declines)
  /seen            answered 200 with the request's Upgrade, Connection and HTTP2-Settings as JSON
  /__stats         answered 200 with what the server counted (never counted itself):
                   {"requests", "handshakes", "closes": [[code, reason], ...]} where closes are the
                   close frames the server received from clients
No keepalive pings: only the clients' and the server's own messages cross the tunnel.
"""
import argparse
import asyncio
import http
import json
import ssl
import urllib.parse

import websockets

stats = {"requests": 0, "handshakes": 0, "closes": []}


async def process_request(path, headers):
    target = urllib.parse.urlsplit(path)
    if target.path == "/__stats":
        return http.HTTPStatus.OK, [("Content-Type", "application/json")], json.dumps(stats).encode()
    stats["requests"] += 1
    if target.path == "/not-upgraded":
        return http.HTTPStatus.OK, [("Content-Type", "text/plain")], b"not upgraded"
    if target.path == "/seen":
        seen = {name: headers.get(name) for name in ("Upgrade", "Connection", "HTTP2-Settings")}
        return http.HTTPStatus.OK, [("Content-Type", "application/json")], json.dumps(seen).encode()
    return None


async def handler(websocket):
    stats["handshakes"] += 1
    target = urllib.parse.urlsplit(websocket.path)
    query = urllib.parse.parse_qs(target.query)
    try:
        if target.path == "/push":
            count = int(query.get("n", ["10"])[0])
            interval = int(query.get("ms", ["100"])[0]) / 1000
            for i in range(count):
                await websocket.send(f"push {i}")
                await asyncio.sleep(interval)
        async for message in websocket:
            if message == "close-me":
                await websocket.close(4001, "bye")
                break
            await websocket.send(message)
    except websockets.ConnectionClosed:
        pass
    finally:
        # The close frame the client sent, if one came (1006: none).
        stats["closes"].append([websocket.close_code, websocket.close_reason])


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert")
    parser.add_argument("--key")
    args = parser.parse_args()
    context = None
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
    async with websockets.serve(handler, "127.0.0.1", 0, ssl=context, process_request=process_request,
                                ping_interval=None, max_size=None, close_timeout=5) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"listening 127.0.0.1:{port}", flush=True)
        await asyncio.Future()


asyncio.run(main())
