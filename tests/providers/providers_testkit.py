"""Shared helpers for the providers tests (imported by conftest.py and the test modules)."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from vendor_endpoint import VendorEndpoint

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass
class ProviderServer:
    """An aiohttp server answering /v1/models, /v1/chat/completions and /v1/messages.

    ``mode`` picks the answer: "ok", "401", "403", "404", "429", "500", "hang" (never answers),
    or "no-models" (404 on the models list, 200 on a one-token request), or "chat-only" (no
    Responses API: 404 on /responses, as a chat-completions-only gateway answers Codex).
    """

    base_url: str = ""
    mode: str = "ok"
    models: list[str] = field(default_factory=lambda: ["model-a", "model-b"])
    seen: list[dict[str, Any]] = field(default_factory=list)  # method, path, headers, body
    redirect_to: str = ""  # set: answer 307 to this base URL + the request's path
    redirect_methods: tuple[str, ...] = ("GET", "POST")

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append(
            {
                "method": request.method,
                "path": request.path,
                "headers": dict(request.headers),
                "body": body.decode("utf-8", "replace"),
            }
        )
        if self.redirect_to and request.method in self.redirect_methods:
            raise web.HTTPTemporaryRedirect(self.redirect_to + request.path_qs)
        if self.mode == "hang":
            await asyncio.sleep(3600)
        if self.mode.isdigit():
            status = int(self.mode)
            return web.json_response({"error": {"message": f"mode {status}"}}, status=status)
        if request.path.endswith("/models"):
            if self.mode == "no-models":
                return web.json_response({"error": "no such route"}, status=404)
            return web.json_response(
                {"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]}
            )
        if request.path.endswith("/chat/completions"):
            return web.json_response(
                {
                    "id": "c1",
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "p"}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            )
        if request.path.endswith("/responses"):
            if self.mode == "chat-only":
                return web.json_response({"error": "no such route"}, status=404)
            return web.json_response(
                {"id": "r1", "object": "response", "status": "completed", "output": []}
            )
        if request.path.endswith("/messages"):
            return web.json_response(
                {"id": "m1", "type": "message", "content": [{"type": "text", "text": "p"}]}
            )
        return web.json_response({"error": "unknown route"}, status=404)


def fresh_key() -> str:
    """A unique, recognisable fake key (long enough to grep for with confidence)."""
    return "sk-test-" + uuid.uuid4().hex + "7f3a"


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


FAIL_BACKEND = {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}


def env_with(**extra: str) -> dict[str, str]:
    """This process's environment plus ``extra`` (for a CLI subprocess)."""
    env = dict(os.environ)
    env.update(extra)
    return env


def files_holding(value: str, *roots: Path) -> list[str]:
    """Every file below ``roots`` whose bytes contain ``value``."""
    return [
        str(path)
        for root in roots
        for path in root.rglob("*")
        if path.is_file() and value.encode() in path.read_bytes()
    ]


class Endpoint:
    """A loopback vendor endpoint (``vendor_endpoint``) the real clients can talk to."""

    def __init__(self) -> None:
        self.vendor = VendorEndpoint()
        self.base_url = ""

    @property
    def seen(self) -> list[dict[str, Any]]:
        return self.vendor.seen

    def calls(self, suffix: str) -> list[dict[str, Any]]:
        return [r for r in self.seen if r["method"] == "POST" and r["path"].endswith(suffix)]
