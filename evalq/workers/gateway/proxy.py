"""The request path through the door: route, refuse or forward, relay, meter, charge.

Every request ends as one Record on its run, whatever happened: refused by the allowlist or a
budget, answered by the provider (any status, passed through unchanged), or failed.
"""

from __future__ import annotations

import json
import time
from urllib.parse import urlsplit
from typing import TYPE_CHECKING, Any, Optional

import aiohttp
from aiohttp import web

from evalq.workers.gateway import usage as wire_usage
from evalq.workers.gateway.headers import agent_headers, upstream_headers
from evalq.workers.gateway.records import Record
from evalq.workers.gateway.scrub import Scrubber
from evalq.workers.gateway.upstreams import RouteError, route
from evalq.workers.gateway.wire import request_facts, wire_format

if TYPE_CHECKING:
    from evalq.workers.gateway.gateway import Gateway
    from evalq.workers.gateway.run import GatewayRun

MAX_REQUEST_BYTES = 64 * 1024 * 1024
MAX_REPLY_BYTES = 64 * 1024 * 1024
CHUNK = 64 * 1024


class Refused(Exception):
    def __init__(self, status: int, kind: str, message: str, budget: Optional[str] = None):
        super().__init__(message)
        self.status, self.kind, self.budget = status, kind, budget


def error_response(status: int, kind: str, message: str, budget: Optional[str] = None,
                   retry: bool = False) -> web.Response:
    """An error in a shape both Anthropic and OpenAI clients parse; `x-should-retry: false`
    stops their SDKs from retrying what will be refused again."""
    body: dict[str, Any] = {"type": "error", "error": {
        "type": kind, "code": kind, "message": f"evalq gateway: {message}"}}
    if budget:
        body["budget"] = budget
    return web.Response(status=status, body=json.dumps(body).encode(), headers={
        "Content-Type": "application/json", "x-evalq-gateway": kind,
        "x-should-retry": "true" if retry else "false"})


async def read_body(request: web.BaseRequest) -> bytes:
    parts, size = [], 0
    async for chunk in request.content.iter_chunked(CHUNK):
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            raise Refused(413, "request_too_large",
                          f"request body over {MAX_REQUEST_BYTES} bytes")
        parts.append(chunk)
    return b"".join(parts)


async def handle(gateway: "Gateway", run: "GatewayRun",
                 request: web.BaseRequest) -> web.StreamResponse:
    started = time.monotonic()
    record = Record(index=run.next_index(), started_at=time.time(), method=request.method,
                    path=request.raw_path.split("?", 1)[0][:2048])
    admitted = False
    try:
        if request.method == "CONNECT":
            raise Refused(403, "not_allowed", "CONNECT tunnels are refused: point the agent's "
                                              "base URL at the gateway instead")
        try:
            upstream, url = route(run.upstreams, request.raw_path)
        except RouteError as exc:
            raise Refused(403, "not_allowed", str(exc)) from None
        record.upstream = upstream.base
        body = await read_body(request)
        record.request_bytes = len(body)
        record.wire = wire_format(urlsplit(url).path)
        facts = request_facts(record.wire, body)
        record.model, record.stream = facts.model, facts.stream
        record.prompt_messages, record.prompt_chars = facts.prompt_messages, facts.prompt_chars
        record.retry = run.seen_before(request.method, url, body)
        if record.wire is not None:
            reason = run.meter.admit()
            if reason is not None:
                raise Refused(429, "budget_exhausted", reason, run.meter.budget_name(reason))
            admitted = True
        return await forward(gateway, run, request, record, upstream, url, body, started)
    except Refused as exc:
        record.refused, record.status = str(exc), exc.status
        return error_response(exc.status, exc.kind, str(exc), exc.budget)
    finally:
        record.latency_ms = round((time.monotonic() - started) * 1000, 3)
        record.price(gateway.price_table)
        run.add(record)
        if admitted:
            reason = run.meter.charge(record)
            if reason is not None:
                run.spend(reason)


async def forward(gateway: "Gateway", run: "GatewayRun", request: web.BaseRequest,
                  record: Record, upstream, url: str, body: bytes,
                  started: float) -> web.StreamResponse:
    key = run.credentials.get(upstream.credential) if upstream.credential else None
    headers = upstream_headers(request.headers.items(), upstream.auth, key)
    scrubber = Scrubber(run.secrets)
    token, streaming = None, False
    if run.concurrency is not None:
        token = await gateway.slots.acquire(upstream.origin, run.concurrency)
        record.queued_ms = round((time.monotonic() - started) * 1000, 3)
    try:
        async with gateway.session.request(request.method, url, headers=headers,
                                           data=body or None, allow_redirects=False) as reply:
            record.status = reply.status
            out_headers = agent_headers(reply.headers.items(), run.secrets)
            if reply.headers.get("Content-Type", "").startswith("text/event-stream"):
                streaming = True
                return await relay_stream(request, reply, out_headers, record, scrubber)
            data = await read_reply(reply)
            if 200 <= reply.status < 300 and record.wire is not None:
                record.usage = wire_usage.from_body(record.wire, data)
            return web.Response(status=reply.status, headers=out_headers,
                                body=scrubber.whole(data))
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
        if streaming:  # the agent already has the head: break its stream, do not end it cleanly
            record.error = f"upstream stream broke: {type(exc).__name__}"
            raise
        message = scrubber.whole(f"upstream {upstream.base} failed: {type(exc).__name__}: "
                                 f"{exc}".encode()).decode(errors="replace")
        record.error, record.status = message, 502
        return error_response(502, "upstream_error", message, retry=True)
    finally:
        if token is not None:
            await gateway.slots.release(upstream.origin, token)


async def read_reply(reply: aiohttp.ClientResponse) -> bytes:
    parts, size = [], 0
    async for chunk in reply.content.iter_chunked(CHUNK):
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            raise ValueError(f"reply over {MAX_REPLY_BYTES} bytes")
        parts.append(chunk)
    return b"".join(parts)


async def relay_stream(request: web.BaseRequest, reply: aiohttp.ClientResponse, headers,
                       record: Record, scrubber: Scrubber) -> web.StreamResponse:
    """Server-sent events to the agent as they come, usage read off the same bytes."""
    metered = wire_usage.StreamUsage(record.wire if 200 <= reply.status < 300 else None)
    response = web.StreamResponse(status=reply.status, headers=headers)
    await response.prepare(request)
    try:
        async for chunk in reply.content.iter_any():
            metered.feed(chunk)
            out = scrubber.feed(chunk)
            if out:
                await response.write(out)
        await response.write(scrubber.flush())
        await response.write_eof()
    except (ConnectionError, aiohttp.ClientConnectionResetError) as exc:
        record.error = f"agent disconnected mid-stream: {type(exc).__name__}"
    finally:
        record.usage = metered.usage
    return response
