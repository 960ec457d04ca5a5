"""The asynchronous path's HTTP transport: one aiohttp session per event loop.

The online executor (llm/async_executor.py) and the reward endpoint's judge loop
(judging/reward_service.py) keep up to C requests in flight on one event loop, and at the
paper's latencies the transport's CPU per request is what bounds them (docs/benchmarks.md).
The HTTP library the ``openai`` package is built on spends about 3 ms of CPU per pooled POST of
a 14 kB judge prompt on this machine; aiohttp, whose parser is compiled, about 0.4 ms
(``bench/reward_cpu.py --transport``). Requests keep the ``openai`` package's contract: the
same headers, no redirects followed (llm/outbound.py), and failures raised as its error
classes (``APITimeoutError``, ``APIConnectionError``, and the status errors its client builds
from a response), so the retry policy, ``retry-after`` and the stored error texts are the same
for both paths."""

from __future__ import annotations

import asyncio
import ssl
import urllib.parse
import urllib.request
from typing import Any

import aiohttp
import httpx2 as _http  # the HTTP library the pinned openai client is built on: its error classes take its types
import openai


class AsyncTransport:
    """POSTs JSON bodies to one endpoint from one event loop.

    ``errors_from`` is the endpoint's ``openai`` client: a status >= 400 becomes the error it
    would raise for that response. Made on the loop that uses it; ``aclose`` before the loop
    ends."""

    def __init__(
        self,
        *,
        base_url: str,
        headers: dict[str, str],
        tls: ssl.SSLContext,
        errors_from: openai.OpenAI,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = {"Content-Type": "application/json", **headers}
        self.errors_from = errors_from
        self.loop = asyncio.get_running_loop()
        # The environment's proxy for this endpoint, read once: aiohttp's own reading
        # (``trust_env``) looks the proxy variables and ~/.netrc up again for every request,
        # through the loop's thread pool, which took about a tenth of a judge worker's CPU.
        self.proxy = env_proxy(self.base_url)
        # No cap on connections here: the shared limits (llm/limits.py) decide how many
        # requests are in flight.
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, ssl=tls),
            trust_env=False,
            auto_decompress=True,
        )

    async def post(self, path_url: str, content: bytes, timeout: float) -> bytes:
        """The response body of a POST, or the ``openai`` error for what happened."""
        url = self.base_url + path_url
        try:
            async with self.session.post(
                url,
                data=content,
                headers=self.headers,
                allow_redirects=False,
                proxy=self.proxy,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:
                body = await response.read()
                status = response.status
                headers = list(response.headers.items())
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise openai.APITimeoutError(request=_request(url)) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise openai.APIConnectionError(request=_request(url)) from exc
        if status >= 400:
            failed = _http.Response(status, headers=headers, content=body, request=_request(url))
            raise self.errors_from._make_status_error_from_response(failed)
        return body

    async def aclose(self) -> None:
        await self.session.close()


def env_proxy(base_url: str) -> str | None:
    """The proxy the environment names for ``base_url`` (``HTTPS_PROXY`` / ``HTTP_PROXY`` by
    the URL's scheme, ``ALL_PROXY``), or None when there is none or ``NO_PROXY`` covers the
    host: the rule of the synchronous path's HTTP library, read once per transport."""
    parts = urllib.parse.urlsplit(base_url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return proxy


def _request(url: str) -> _http.Request:
    """The request an ``openai`` error names (its method and URL; never the key or body)."""
    return _http.Request("POST", url)


def transport_for_loop(current: AsyncTransport | None, **kwargs: Any) -> AsyncTransport:
    """``current`` when it belongs to the running loop, else a new transport for it."""
    if current is not None and current.loop is asyncio.get_running_loop() and not current.session.closed:
        return current
    return AsyncTransport(**kwargs)
