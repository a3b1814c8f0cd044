"""A scripted LLM API server on 127.0.0.1 for provider tests (no network beyond loopback).

:class:`FakeLLMServer` is a real HTTP server (``http.server`` in a thread, port 0) that answers
``POST`` requests with a scripted list of :class:`Reply` objects in order, and records every
request (path, headers, JSON body) so tests can assert what the SDK sent. It speaks whatever wire
format the replies are written in; helpers build replies for the two formats the providers use:

- Anthropic Messages: ``POST /v1/messages`` (:func:`anthropic_message`, :func:`tool_use`,
  :func:`text_block`);
- OpenAI Chat Completions: ``POST /v1/chat/completions`` (:func:`openai_completion`,
  :func:`function_call`).

A reply can carry an HTTP status, headers (``retry-after-ms``) and a delay (to provoke client
timeouts; the delay is cut short when the server stops). When the script runs out the server
answers 500, so a test that makes more requests than it scripted fails loudly.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "Reply",
    "RecordedRequest",
    "FakeLLMServer",
    "anthropic_message",
    "text_block",
    "tool_use",
    "openai_completion",
    "function_call",
    "error_reply",
]


@dataclass
class Reply:
    """One scripted HTTP answer.

    Attributes:
        body: JSON-serialisable body, or a ``str`` sent verbatim.
        status: HTTP status code.
        headers: extra response headers.
        delay: seconds to wait before answering (to trigger client timeouts).
    """

    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class RecordedRequest:
    """One request the server received: method, path, headers (lower-case names), body, and
    when it arrived (``time.monotonic()``, seconds)."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    at: float = field(default_factory=time.monotonic)

    @property
    def json(self) -> Any:
        """The body decoded as JSON (raises ``ValueError`` if it is not JSON)."""
        return json.loads(self.raw.decode())


class FakeLLMServer:
    """A loopback HTTP server replaying ``script`` (use as a context manager).

    Args:
        script: the replies, in order; one per request.

    Attributes:
        requests: every request received, in order.
        url: ``http://127.0.0.1:<port>`` (set once started).
    """

    def __init__(self, script: list[Reply]):
        self.script = list(script)
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def __enter__(self) -> "FakeLLMServer":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        """Bind 127.0.0.1 on a free port and serve in a daemon thread."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                n = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(n) if n else b""
                with server._lock:
                    server.requests.append(RecordedRequest(
                        "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, raw))
                    reply = server.script.pop(0) if server.script else Reply(
                        {"error": {"type": "script_exhausted",
                                   "message": "fake server: no scripted reply left"}}, status=500,
                        headers={"x-should-retry": "false"})
                if reply.delay:
                    server._stop.wait(reply.delay)
                body = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                data = body.encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

            do_GET = do_POST

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving (interrupts pending delays) and close the socket."""
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


# ---- Anthropic Messages -------------------------------------------------------------------------
def text_block(text: str) -> dict[str, Any]:
    """An Anthropic ``text`` content block."""
    return {"type": "text", "text": text}


def tool_use(id: str, name: str, input: Any) -> dict[str, Any]:  # noqa: A002 (wire names)
    """An Anthropic ``tool_use`` content block."""
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def anthropic_message(content: list[dict[str, Any]], stop_reason: str = "tool_use",
                      input_tokens: int = 10, output_tokens: int = 5, **extra: Any) -> Reply:
    """A 200 reply with an Anthropic ``Message`` body."""
    body = {"id": "msg_fake", "type": "message", "role": "assistant", "model": "claude-fake",
            "content": content, "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}, **extra}
    return Reply(body)


# ---- OpenAI Chat Completions --------------------------------------------------------------------
def function_call(id: str, name: str, arguments: Any) -> dict[str, Any]:  # noqa: A002
    """An OpenAI ``tool_calls`` entry; ``arguments`` dicts are JSON-encoded, strings sent as is."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": id, "type": "function", "function": {"name": name, "arguments": args}}


def openai_completion(content: str | None = None, tool_calls: list[dict[str, Any]] | None = None,
                      finish_reason: str | None = None, refusal: str | None = None,
                      prompt_tokens: int = 10, completion_tokens: int = 5) -> Reply:
    """A 200 reply with an OpenAI ``chat.completion`` body."""
    msg: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    finish = finish_reason or ("tool_calls" if tool_calls else "stop")
    body = {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "gpt-fake",
            "choices": [{"index": 0, "message": msg, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}
    return Reply(body)


def error_reply(status: int, message: str = "error", headers: dict[str, str] | None = None,
                err_type: str = "error") -> Reply:
    """An error reply in the shape both APIs use: ``{"error": {"type", "message"}}``."""
    return Reply({"type": "error", "error": {"type": err_type, "message": message}},
                 status=status, headers=dict(headers or {}))
