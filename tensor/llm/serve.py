"""An OpenAI-compatible HTTP API for one model (`python -m tensor.llm --model FILE --serve [PORT]`): POST
/v1/chat/completions (a JSON answer, or server-sent events with "stream": true) and GET /v1/models. Python's http.server
only; connections are threads but generation holds one lock, so requests are served one at a time. Bad requests get a
4xx JSON error {"error": {"message", "type", "param", "code"}} naming the field. Part of tensor.llm; docs/llm.md.

  server = make_server(model, tok, "my-model", port=0)   # port 0: any free port, server.server_address[1]
  server.serve_forever()
"""
from __future__ import annotations
import json, threading, time, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from tensor.llm.chat import chat_ids, stream_text
from tensor.llm.model import Transformer
from tensor.llm.tokenizer import Tokenizer

__all__ = ["make_server", "RequestError"]

MAX_BODY = 8 << 20   # bytes of a request body
ROLES = ("system", "user", "assistant")

class RequestError(Exception):
  """A request we refuse: its HTTP status, message and the offending field (OpenAI's error shape)."""
  def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None, kind: str = "invalid_request_error"):
    super().__init__(message)
    self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind
  def body(self) -> dict[str, Any]: return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}

def _number(req: dict[str, Any], key: str, default: Any, lo: float, hi: float, integer: bool = False) -> Any:
  v = req.get(key, default)
  if v is None: return default
  if isinstance(v, bool) or not isinstance(v, int if integer else (int, float)) or not lo <= v <= hi:
    raise RequestError(400, f"{key} must be {'an integer' if integer else 'a number'} in [{lo}, {hi}], got {v!r}", key)
  return v

def _content(m: dict[str, Any], k: int) -> str:
  """A message's text: a string, or OpenAI's list of {"type": "text", "text": ...} parts."""
  c = m.get("content")
  if isinstance(c, str): return c
  if isinstance(c, list) and all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in c):
    return "".join(p["text"] for p in c)
  raise RequestError(400, f"messages[{k}].content must be a string or a list of text parts", f"messages[{k}].content")

def parse_chat(req: Any, model_id: str) -> dict[str, Any]:
  """The checked fields of a chat-completion request (RequestError for the first bad one)."""
  if not isinstance(req, dict): raise RequestError(400, "the request body must be a JSON object")
  if req.get("model", model_id) != model_id:
    raise RequestError(404, f"model {req['model']!r} is not served here (this server has {model_id!r})", "model", "model_not_found")
  msgs = req.get("messages")
  if not isinstance(msgs, list) or not msgs: raise RequestError(400, "messages must be a non-empty list of {role, content}", "messages")
  turns = []
  for k, m in enumerate(msgs):
    if not isinstance(m, dict) or m.get("role") not in ROLES:
      raise RequestError(400, f"messages[{k}].role must be one of {', '.join(ROLES)}", f"messages[{k}].role")
    turns.append((m["role"], _content(m, k)))
  stop = req.get("stop")
  if isinstance(stop, str): stop = [stop]
  if stop is not None and (not isinstance(stop, list) or len(stop) > 4 or not all(isinstance(s, str) for s in stop)):
    raise RequestError(400, "stop must be a string or a list of up to 4 strings", "stop")
  if req.get("n", 1) != 1: raise RequestError(400, "n must be 1 (one answer per request)", "n")
  if not isinstance(req.get("stream", False), bool): raise RequestError(400, "stream must be true or false", "stream")
  max_key = "max_completion_tokens" if req.get("max_completion_tokens") is not None else "max_tokens"
  return {"turns": turns, "stop": stop, "stream": req.get("stream", False), "max_new": _number(req, max_key, None, 1, 1 << 30, True),
          "temperature": _number(req, "temperature", 1.0, 0, 2), "top_p": _number(req, "top_p", 1.0, 0, 1),
          "top_k": _number(req, "top_k", 0, 0, 1 << 30, True), "seed": _number(req, "seed", None, -(1 << 63), (1 << 63) - 1, True)}

class _Handler(BaseHTTPRequestHandler):
  server: _Server
  protocol_version = "HTTP/1.1"

  def log_message(self, format: str, *args: Any) -> None:
    if self.server.verbose: super().log_message(format, *args)

  def _json(self, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    self.send_response(status)
    self.send_header("Content-Type", "application/json")
    self.send_header("Content-Length", str(len(data)))
    self.end_headers()
    self.wfile.write(data)

  def _fail(self, e: RequestError) -> None: self._json(e.status, e.body())

  def do_GET(self) -> None:
    s = self.server
    card = {"id": s.model_id, "object": "model", "created": s.created, "owned_by": "rulegrad"}
    path = self.path.split("?")[0].rstrip("/")
    if path == "/v1/models": self._json(200, {"object": "list", "data": [card]})
    elif path == f"/v1/models/{s.model_id}": self._json(200, card)
    elif path.startswith("/v1/models/"): self._fail(RequestError(404, f"model {path[11:]!r} is not served here", "model", "model_not_found"))
    else: self._fail(RequestError(404, f"no route GET {path} (this server has GET /v1/models and POST /v1/chat/completions)"))

  def do_POST(self) -> None:
    path = self.path.split("?")[0].rstrip("/")
    try:
      if path != "/v1/chat/completions": raise RequestError(404, f"no route POST {path} (this server has POST /v1/chat/completions)")
      try: n = int(self.headers.get("Content-Length", ""))
      except ValueError: raise RequestError(411, "a request body needs a Content-Length") from None
      if not 0 <= n <= MAX_BODY: raise RequestError(413, f"a request body of {n} bytes is over the limit of {MAX_BODY}")
      try: req = json.loads(self.rfile.read(n))
      except (ValueError, UnicodeDecodeError) as e: raise RequestError(400, f"the request body is not JSON: {e}") from None
      self._chat(parse_chat(req, self.server.model_id))
    except RequestError as e:
      self.close_connection = True
      self._fail(e)

  def _chat(self, r: dict[str, Any]) -> None:
    s = self.server
    with s.lock:   # one generation at a time: one model, one KV cache
      ids = chat_ids(s.tok, s.model.cfg.arch, r["turns"])
      room = s.model.cfg.max_context - len(ids)
      if room < 1: raise RequestError(400, f"the prompt is {len(ids)} tokens; the context holds {s.model.cfg.max_context}", "messages",
                                      "context_length_exceeded")
      max_new = min(room, r["max_new"] or room)
      gen = stream_text(s.model, s.tok, ids, max_new, r["temperature"], r["top_k"], r["top_p"], r["seed"], r["stop"])
      cid, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())
      head = {"id": cid, "created": created, "model": s.model_id, "system_fingerprint": "rulegrad"}
      if not r["stream"]:
        text, out, finish = "", [], "stop"
        for piece, out, f in gen:
          text += piece
          finish = f or finish
        self._json(200, {**head, "object": "chat.completion", "choices": [
          {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish, "logprobs": None}],
          "usage": {"prompt_tokens": len(ids), "completion_tokens": len(out), "total_tokens": len(ids) + len(out)}})
        return
      self.send_response(200)
      self.send_header("Content-Type", "text/event-stream")
      self.send_header("Cache-Control", "no-cache")
      self.send_header("Connection", "close")
      self.end_headers()
      self.close_connection = True   # the stream's end is the connection's
      def event(delta: dict[str, Any], finish: str | None) -> None:
        chunk = {**head, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}
        self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        self.wfile.flush()
      try:
        event({"role": "assistant", "content": ""}, None)
        for piece, _, finish in gen:
          if piece: event({"content": piece}, None)
          if finish: event({}, finish)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
      except (BrokenPipeError, ConnectionResetError): pass   # the client went away: stop generating

class _Server(ThreadingHTTPServer):
  daemon_threads = True
  request_queue_size = 128  # socketserver's 5: a burst of clients past 5 waited 1 s per SYN retry
  def __init__(self, addr: tuple[str, int], model: Transformer, tok: Tokenizer, model_id: str, verbose: bool):
    super().__init__(addr, _Handler)
    self.model, self.tok, self.model_id, self.verbose = model, tok, model_id, verbose
    self.lock, self.created = threading.Lock(), int(time.time())

def make_server(model: Transformer, tok: Tokenizer, model_id: str, host: str = "127.0.0.1", port: int = 8000, verbose: bool = False) -> _Server:
  """A bound server (not yet serving: call serve_forever, and shutdown from another thread to stop)."""
  return _Server((host, port), model, tok, model_id, verbose)
