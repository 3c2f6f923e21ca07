"""A scripted fake OpenAI-compatible server over real HTTP, for tests and benchmarks.

It serves `POST /v1/chat/completions` and `GET /v1/models` from a stdlib `ThreadingHTTPServer` in a
background thread, so the agent loop goes through the real `openai` client, sockets and JSON.
Replies are scripted per conversation and stateless: the step is the number of assistant
messages already in the request, so concurrent episodes never share state.

Modes
- `oracle`: replays the task's reference solution as tool calls — write every file of
  `solution/` under /tmp/solution (paths inside rewritten), run solve.sh in /workspace, finish.
  Must pass the real verifier.
- `wrong`: runs the same solution, then overwrites every file it produced with junk; must fail.
- `script`: replays the given list of `ToolStep`s, then finishes (benchmarks, custom tests).
- `malformed`: every reply is a broken tool call (bad JSON in `<tool_call>` text, or native
  arguments that are not JSON); the episode ends at max_turns.
- `chatty`: answers in plain text, never calls a tool.
- `stall`: sleeps `stall_s` before answering (past the client's timeout).
- `drop`: closes the connection without an answer.
- `routed`: `router(messages)` picks each conversation's reply from the request itself: a list of
  `ToolStep`s to replay (then finish), or a string to answer in plain text. A fake policy that
  solves some tasks and fails others (per task, per capability) is a router over the task text.

Options: `rejects_token_ids=True` answers 422 to vLLM's `return_token_ids` field (as transformers
serve does; `rejects_token_ids_status=400` answers 400, as other strict servers do); `latency_s` delays every answer (a stand-in for generation time);
`text_tool_calls=True` writes tool calls hermes-style in the content instead of native
`tool_calls`; `vllm_tokens=True` adds vLLM's `prompt_token_ids`, per-choice `token_ids` and
`logprobs.content` (fake byte-level ids) so the token-exact path is exercised.

vLLM's runtime LoRA API: `POST /v1/load_lora_adapter` `{"lora_name", "lora_path"}` is recorded in
`lora_loads` and the adapter is listed by `/v1/models` (400 when the name is already loaded and
the request does not set `load_inplace`, like vLLM); `lora_load_status=404` answers as a server started without runtime LoRA updating.
`served_root` is the `root` `/v1/models` reports for the served model (vLLM: its folder): a
string, or a callable asked on every `/v1/models` request (a server that is restarted on new
weights while the test runs, e.g. on each iteration's checkpoint).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

Mode = Literal["oracle", "wrong", "script", "malformed", "chatty", "stall", "drop", "routed"]
SOLUTION_COPY = "/tmp/solution"


@dataclass(frozen=True)
class ToolStep:
    name: str
    arguments: dict[str, Any]


# messages of one request -> the conversation's script (replayed step by step, then finish), or a
# plain-text answer. Called on every request of the conversation, so it must be deterministic.
Router = Callable[[list[dict[str, Any]]], "list[ToolStep] | str"]


def first_user_text(messages: list[dict[str, Any]]) -> str:
    """The first user message's text (an agent episode's task message), or "" if there is none."""
    for m in messages:
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):  # OpenAI content parts
                return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def solution_steps(task_dir: Path) -> list[ToolStep]:
    """Tool calls that replay `task_dir/solution/` inside the agent's sandbox (no /solution there)."""
    sol = task_dir / "solution"
    if not (sol / "solve.sh").is_file():
        raise FileNotFoundError(
            f"{sol}/solve.sh not found: the oracle fake needs a Harbor task folder with a solution"
        )
    steps = [ToolStep("list_dir", {"path": "."})]
    for path in sorted(p for p in sol.rglob("*") if p.is_file()):
        rel = path.relative_to(sol).as_posix()
        text = path.read_text().replace("/solution/", SOLUTION_COPY + "/")
        steps.append(ToolStep("write_file", {"path": f"{SOLUTION_COPY}/{rel}", "content": text}))
    steps.append(
        ToolStep("run_shell", {"command": f"cd /workspace && bash {SOLUTION_COPY}/solve.sh"})
    )
    return steps


def wrong_steps(task_dir: Path) -> list[ToolStep]:
    """Do the real work, then spoil every file it wrote: right paths, wrong content."""
    steps = [ToolStep("run_shell", {"command": "touch /tmp/.before-solve && sleep 0.01"})]
    steps += solution_steps(task_dir)
    spoil = (
        "find /workspace -type f -newer /tmp/.before-solve "
        "-exec sh -c 'echo definitely-wrong > \"$1\"' _ {} \\;"
    )
    steps.append(ToolStep("run_shell", {"command": spoil}))
    return steps


def _fake_ids(text: str) -> list[int]:
    return list(text.encode("utf-8"))


class FakeOpenAI:
    """Start with `with FakeOpenAI("oracle", task_dir) as fake: ... fake.base_url ...`."""

    def __init__(
        self,
        mode: Mode,
        task_dir: Path | None = None,
        *,
        text_tool_calls: bool = False,
        vllm_tokens: bool = False,
        stall_s: float = 30.0,
        latency_s: float = 0.0,
        rejects_token_ids: bool = False,
        rejects_token_ids_status: int = 422,
        script: list[ToolStep] | None = None,
        model: str = "fake-policy",
        router: Router | None = None,
        served_root: str | Callable[[], str] = "",
        lora_load_status: int = 200,
        port: int = 0,  # 0: any free port
    ) -> None:
        if mode in ("oracle", "wrong") and task_dir is None:
            raise ValueError(f"mode {mode!r} replays a task's solution: pass task_dir")
        self.mode = mode
        self.port = port
        self.text_tool_calls = text_tool_calls
        self.vllm_tokens = vllm_tokens
        self.stall_s = stall_s
        self.latency_s = latency_s
        self.rejects_token_ids = rejects_token_ids
        self.rejects_token_ids_status = rejects_token_ids_status
        self.model = model
        self.script: list[ToolStep] = list(script or [])
        if mode == "script" and not self.script:
            raise ValueError("mode 'script' replays `script`: pass a non-empty list of ToolStep")
        if mode == "routed" and router is None:
            raise ValueError("mode 'routed' asks `router(messages)` for each reply: pass router")
        self.router = router
        if mode == "oracle":
            self.script = solution_steps(task_dir)  # type: ignore[arg-type]
        elif mode == "wrong":
            self.script = wrong_steps(task_dir)  # type: ignore[arg-type]
        self.requests: list[dict[str, Any]] = []  # every request body received, in order
        self.served_root = served_root
        self.lora_load_status = lora_load_status
        self.lora_loads: list[dict[str, Any]] = []  # every load_lora_adapter body, in order
        self.lora_adapters: dict[str, str] = {}  # loaded adapter name -> path
        self.in_flight = 0
        self.max_in_flight = 0  # most chat requests served at once (tests bound concurrency)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not started: use it as a context manager")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # Headers and body go out as two writes; without NODELAY, Nagle + delayed ACK
                # add ~40 ms per reply on keep-alive connections and swamp every measurement.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/") in ("/v1/models", "/models"):
                    root = fake.served_root
                    root = root() if callable(root) else root
                    base = {"id": fake.model, "object": "model", "root": root}
                    loras = [
                        {"id": n, "object": "model", "root": p, "parent": fake.model}
                        for n, p in fake.lora_adapters.items()
                    ]
                    self._send(200, {"object": "list", "data": [base, *loras]})
                elif self.path.rstrip("/") in ("/health", "/v1/health"):
                    self._send(200, {"status": "ok"})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/") == "/v1/load_lora_adapter":
                    self._send(*fake.load_lora(body))
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                with fake._lock:
                    fake.requests.append(body)
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    self._chat(body)
                finally:
                    with fake._lock:
                        fake.in_flight -= 1

            def _chat(self, body: dict[str, Any]) -> None:
                if fake.rejects_token_ids and "return_token_ids" in body:
                    # like transformers serve: a strict request schema answers 422
                    status = fake.rejects_token_ids_status
                    self._send(status, {"detail": [{"msg": "Extra inputs are not permitted"}]})
                    return
                if fake.mode == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)  # the client sees the socket close mid-request
                    return
                if fake.mode == "stall":
                    fake._stop.wait(fake.stall_s)
                elif fake.latency_s > 0:
                    fake._stop.wait(fake.latency_s)
                # the client may have given up (stall): then there is nobody to answer
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._send(200, fake.respond(body))

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def load_lora(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """vLLM's `load_lora_adapter`: (status, body); records the request."""
        with self._lock:
            self.lora_loads.append(body)
            name, path = str(body.get("lora_name", "")), str(body.get("lora_path", ""))
            if self.lora_load_status != 200:
                return self.lora_load_status, {"detail": "Not Found"}
            if not name or not path:
                return 400, {"message": "both 'lora_name' and 'lora_path' must be provided."}
            if name in self.lora_adapters and not body.get("load_inplace"):
                return 400, {
                    "message": f"The lora adapter '{name}' has already been loaded. If you want "
                    "to load the adapter in place, set 'load_inplace' to True."
                }
            self.lora_adapters[name] = path
        return 200, {"message": f"Success: LoRA adapter '{name}' added successfully."}

    # -- scripted replies (pure: request body -> response body) ------------------------------
    def _next_calls(self, step: int) -> tuple[str, list[ToolStep]]:
        if self.mode in ("oracle", "wrong", "script"):
            if step < len(self.script):
                return "", [self.script[step]]
            return "", [ToolStep("finish", {"summary": "outputs written"})]
        if self.mode == "chatty":
            return "I think the task is done.", []
        return "", [ToolStep("run_shell", {"command": "ls"})]  # stall mode answers sanely, late

    def _routed_calls(
        self, messages: list[dict[str, Any]], step: int
    ) -> tuple[str, list[ToolStep]]:
        picked = self.router(messages)  # type: ignore[misc]
        if isinstance(picked, str):
            return picked, []
        if step < len(picked):
            return "", [picked[step]]
        return "", [ToolStep("finish", {"summary": "outputs written"})]

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        step = sum(1 for m in messages if m.get("role") == "assistant")
        if self.mode == "routed":
            content, calls = self._routed_calls(messages, step)
        else:
            content, calls = self._next_calls(step)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if self.mode == "malformed":
            if step % 2 == 0:
                message["content"] = (
                    '<tool_call>{"name": "run_shell", "arguments": {"command": </tool_call>'
                )
            else:
                message["tool_calls"] = [
                    {
                        "id": f"call_{uuid.uuid4().hex[:8]}",
                        "type": "function",
                        "function": {"name": "write_file", "arguments": "{path: output.txt"},
                    }
                ]
        elif self.text_tool_calls and calls:
            blocks = [
                "<tool_call>\n"
                + json.dumps({"name": c.name, "arguments": c.arguments})
                + "\n</tool_call>"
                for c in calls
            ]
            message["content"] = (content + "\n" if content else "") + "\n".join(blocks)
        elif calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{uuid.uuid4().hex[:8]}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in calls
            ]
        completion_text = json.dumps(message)
        prompt_text = json.dumps(messages)
        response: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": len(prompt_text) // 4,
                "completion_tokens": len(completion_text) // 4,
                "total_tokens": len(prompt_text) // 4 + len(completion_text) // 4,
            },
        }
        if self.vllm_tokens:
            ids = _fake_ids(completion_text)
            response["prompt_token_ids"] = _fake_ids(prompt_text)
            response["choices"][0]["token_ids"] = ids
            response["choices"][0]["logprobs"] = {
                "content": [
                    {
                        "token": chr(i) if i < 128 else "?",
                        "logprob": -0.01 * (k % 7),
                        "bytes": [i],
                        "top_logprobs": [],
                    }
                    for k, i in enumerate(ids)
                ]
            }
            response["usage"]["prompt_tokens"] = len(response["prompt_token_ids"])
            response["usage"]["completion_tokens"] = len(ids)
        return response
