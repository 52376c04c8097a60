"""The request path through the door: route, refuse or forward, relay, meter, charge.

Every request ends as one Record on its run, whatever happened: refused by the allowlist or a
budget, answered by the provider (any status, passed through unchanged), or failed.
"""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit
from typing import TYPE_CHECKING, Any, Optional

import aiohttp
from aiohttp import web

from evalq.report.json_text import dumps
from evalq.workers.gateway import usage as wire_usage
from evalq.workers.gateway.endpoints import NotAnEndpoint, endpoint
from evalq.workers.gateway.headers import agent_headers, upstream_headers
from evalq.workers.gateway.records import MAX_MESSAGE_CHARS, Record, bounded
from evalq.workers.gateway.scrub import Scrubber
from evalq.workers.gateway.upstreams import RouteError, route
from evalq.workers.gateway.wire import request_facts, usage_requested

if TYPE_CHECKING:
    from evalq.workers.gateway.gateway import Gateway
    from evalq.workers.gateway.run import GatewayRun

MAX_REQUEST_BYTES = 32 * 1024 * 1024  # the largest request Anthropic and OpenAI accept
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
    return web.Response(status=status, body=dumps(body).encode(), headers={
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


class Ledger:
    """Writes one request's record to its run exactly once: before the agent sees the end of the
    reply, so whoever reads the run after a reply ends finds it there (and budgets charged)."""

    def __init__(self, gateway: "Gateway", run: "GatewayRun", record: Record,
                 started: Optional[float] = None):
        self.gateway, self.run, self.record = gateway, run, record
        self.started = time.monotonic() if started is None else started
        self.admitted = False
        self.done = False

    def elapsed_ms(self) -> float:
        return since(self.started)

    def finish(self) -> None:
        if self.done:
            return
        self.done = True
        self.record.latency_ms = self.elapsed_ms()
        self.record.price(self.gateway.price_table)
        self.run.add(self.record)
        if self.admitted:
            reason = self.run.meter.charge(self.record)
            if reason is not None:
                self.run.spend(reason)


async def handle(gateway: "Gateway", run: "GatewayRun",
                 request: web.BaseRequest) -> web.StreamResponse:
    if run.over_cap():
        return error_response(429, "too_many_requests", "this run has sent more requests "
                              "through its door than any run may; no more are served")
    record = Record(index=run.next_index(), started_at=time.time(),
                    method=bounded(request.method, 16),
                    path=bounded(request.raw_path.split("?", 1)[0]))
    arrivals = getattr(run.http_server, "arrived", {})
    ledger = Ledger(gateway, run, record, arrivals.pop(request.protocol, None))
    held = False
    task = asyncio.current_task()
    run.in_flight.add(task)
    try:
        if request.method == "CONNECT":
            raise Refused(403, "not_allowed", "CONNECT tunnels are refused: point the agent's "
                                              "base URL at the gateway instead")
        try:
            upstream, url = route(run.upstreams, request.raw_path)
            record.upstream = upstream.base
            record.wire = endpoint(upstream.api, upstream.prefix, request.method,
                                   urlsplit(url).path)
        except (RouteError, NotAnEndpoint) as exc:
            raise Refused(403, "not_allowed", bounded(str(exc), MAX_MESSAGE_CHARS)) from None
        body = await read_body(request)
        record.request_bytes = len(body)
        facts = request_facts(record.wire, body)
        record.model, record.stream = bounded(facts.model), facts.stream
        record.max_output = facts.max_output
        if record.wire is not None:
            check_model(gateway, run, facts.model)
        record.prompt_messages, record.prompt_chars = facts.prompt_messages, facts.prompt_chars
        record.retry = run.seen_before(request.method, url, body)
        asked = usage_requested(record.wire, body, facts)
        if asked is not None:
            body, record.usage_requested = asked, True
        if record.wire is not None:
            held = await take_place(run)
            reason = run.meter.admit()
            if reason is not None:
                raise Refused(429, "budget_exhausted", reason, run.meter.budget_name(reason))
            ledger.admitted = True
        return await forward(gateway, run, request, ledger, upstream, url, body)
    except Refused as exc:
        record.refused, record.status = str(exc), exc.status
        return error_response(exc.status, exc.kind, str(exc), exc.budget)
    except asyncio.CancelledError:
        record.error = record.error or "the run was closed while this request was in flight"
        # a model call sent on may be billed, and its usage was never read: the run's totals
        # are unknown, not short of it
        record.cut_at_close = not ledger.done and ledger.admitted
        raise
    finally:
        arrivals.pop(request.protocol, None)  # this request's own body, not the next one
        ledger.finish()  # charged before the place is given up: the next admit sees it
        if held:
            run.model_calls.release()
        run.in_flight.discard(task)


def check_model(gateway: "Gateway", run: "GatewayRun", model: Optional[str]) -> None:
    """Refuse a model call naming a model the run may not use, or one a cost budget cannot
    price (its calls could not be charged: the budget would not hold)."""
    shown = repr(bounded(model or "", 100))
    if run.models is not None and model not in run.models:
        raise Refused(403, "model_not_allowed", f"model {shown} is not one this condition "
                      f"may use ({', '.join(sorted(run.models))}): it pins its model "
                      "(settings.allowed_models names any others)")
    table = gateway.price_table
    if run.meter.budgets.max_cost_usd is not None and table.name_of(model) is None:
        raise Refused(403, "unpriced_model", f"model {shown} has no price in the price table "
                      f"{table.id}, and this run has a cost budget, which an unpriced call "
                      "could overrun: use a priced model id (or one of its listed aliases), or "
                      "add the model to the price table")


async def take_place(run: "GatewayRun") -> bool:
    """Wait for a place among the run's budgeted model calls in flight (run.py); whether one
    was taken (a run without a token or cost budget has no such limit)."""
    if run.model_calls is None:
        return False
    if run.model_calls.locked():
        run.waiting.add("model", 1)
        try:
            await run.model_calls.acquire()
        finally:
            run.waiting.add("model", -1)
    else:
        await run.model_calls.acquire()
    return True


async def forward(gateway: "Gateway", run: "GatewayRun", request: web.BaseRequest,
                  ledger: Ledger, upstream, url: str, body: bytes) -> web.StreamResponse:
    record = ledger.record
    key = run.credentials.get(upstream.credential) if upstream.credential else None
    headers = upstream_headers(request.headers.items(), upstream.auth, key)
    scrubber = Scrubber(run.secrets)
    token, streaming = None, False
    if run.concurrency is not None:
        try:
            token = await gateway.slots.acquire(upstream.origin, run.concurrency)
        except Exception as exc:  # noqa: BLE001 - the broker holding the slots is unreachable
            record.error, record.status = f"no concurrency slot: {type(exc).__name__}", 503
            return error_response(503, "gateway_unavailable", "the provider's concurrency "
                                  "slots cannot be reached (is Redis up?)", retry=True)
        record.queued_ms = ledger.elapsed_ms()
    sent = time.monotonic()
    try:
        async with gateway.session.request(request.method, url, headers=headers,
                                           data=body or None, allow_redirects=False) as reply:
            record.status = reply.status
            out_headers = agent_headers(reply.headers.items(), run.secrets)
            if reply.headers.get("Content-Type", "").startswith("text/event-stream"):
                streaming = True
                return await relay_stream(request, reply, out_headers, ledger, scrubber, sent)
            data = await read_reply(reply)
            record.upstream_ms = since(sent)
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
        record.error, record.status = bounded(message, MAX_MESSAGE_CHARS), 502
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


def since(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 3)


async def relay_stream(request: web.BaseRequest, reply: aiohttp.ClientResponse, headers,
                       ledger: Ledger, scrubber: Scrubber, sent: float) -> web.StreamResponse:
    """Server-sent events to the agent as they come, usage read off the same bytes."""
    record = ledger.record
    metered = wire_usage.StreamUsage(record.wire if 200 <= reply.status < 300 else None)
    response = web.StreamResponse(status=reply.status, headers=headers)
    await response.prepare(request)
    last = b""
    try:
        async for chunk in reply.content.iter_any():
            metered.feed(chunk)
            out = scrubber.feed(chunk)
            if reply.content.at_eof():  # the last chunk: it goes out with the stream's end,
                last = out              # one write instead of two
            elif out:
                await response.write(out)
        record.upstream_ms = since(sent)
        record.usage = metered.usage
        ledger.finish()
        await response.write_eof(last + scrubber.flush())
    except (ConnectionError, aiohttp.ClientConnectionResetError) as exc:
        record.error = record.error or f"agent disconnected mid-stream: {type(exc).__name__}"
        await drain(reply, metered)
    finally:
        record.usage = metered.usage
    return response


async def drain(reply: aiohttp.ClientResponse, metered: "wire_usage.StreamUsage") -> None:
    """Read the rest of a stream the agent hung up on, for its usage only: the provider bills
    the whole reply, and its counts come last (Anthropic's message_delta, OpenAI's usage
    chunk), so an agent that hangs up once the text is in would otherwise go unmetered."""
    size = 0
    try:
        async for chunk in reply.content.iter_any():
            size += len(chunk)
            if size > MAX_REPLY_BYTES:
                return
            metered.feed(chunk)
    except (aiohttp.ClientError, OSError, TimeoutError):
        return
