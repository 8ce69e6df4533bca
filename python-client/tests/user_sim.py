"""A scripted simulated user: an OpenAI-compatible endpoint on 127.0.0.1 for ``--user-base-url``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STOP = "###STOP###"


@contextmanager
def scripted_user(replies: Sequence[str]) -> Iterator[str]:
    """Serves a user who says ``replies[n]`` after n replies of its own (so a retried request gets
    the same line), then ``###STOP###``; yields the base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
            said = sum(m.get("role") == "assistant" for m in body.get("messages", []))
            line = replies[said] if said < len(replies) else STOP
            message = {"role": "assistant", "content": f"# Thought:\nscripted.\n# Reply:\n{line}"}
            choice = {"index": 0, "finish_reason": "stop", "message": message}
            usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
            out = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "user-sim", "choices": [choice], "usage": usage}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
