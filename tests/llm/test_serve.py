"""tensor/llm/serve.py: the OpenAI-compatible server answers the `openai` client over loopback (a tiny random gemma3
written with `gguf`): the answer is the model's own greedy generation, streamed or not; /v1/models; 4xx JSON errors."""
import json, sys, pathlib, threading, urllib.error, urllib.request
import pytest
pytest.importorskip("gguf", reason="pip install gguf to run the server tests")
openai = pytest.importorskip("openai", reason="pip install openai to test the server with its client")
sys.path.insert(0, str(pathlib.Path(__file__).parent))
from tiny import write_model  # noqa: E402
from tensor.llm import Transformer  # noqa: E402
from tensor.llm.chat import chat_ids  # noqa: E402
from tensor.llm.serve import make_server  # noqa: E402
from tensor.llm.tokenizer import Tokenizer  # noqa: E402

@pytest.fixture(scope="module")
def served(tmp_path_factory):
  path = tmp_path_factory.mktemp("serve") / "m.gguf"
  write_model(path, "gemma3", head_dim=32)
  model = Transformer.from_gguf(path, max_context=128)
  tok = Tokenizer.from_gguf_metadata(model.meta)
  server = make_server(model, tok, "tiny", port=0)
  thread = threading.Thread(target=server.serve_forever, daemon=True)
  thread.start()
  url = f"http://127.0.0.1:{server.server_address[1]}/v1"
  yield model, tok, url, openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=60)
  server.shutdown()
  server.server_close()

MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "the capital"}]

def _expected(model, tok, n):
  ids = chat_ids(tok, "gemma3", [("system", "be brief"), ("user", "the capital")])
  return ids, tok.decode(list(model.generate(ids, n))[:n])

def test_chat_completion_and_stream(served):
  model, tok, _, client = served
  ids, want = _expected(model, tok, 6)
  r = client.chat.completions.create(model="tiny", messages=MSGS, max_tokens=6, temperature=0)
  assert r.object == "chat.completion" and r.model == "tiny"
  assert r.choices[0].message.role == "assistant" and r.choices[0].message.content == want
  assert r.choices[0].finish_reason == "length"
  assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (len(ids), 6, len(ids) + 6)
  chunks = list(client.chat.completions.create(model="tiny", messages=MSGS, max_tokens=6, temperature=0, stream=True))
  assert chunks[0].choices[0].delta.role == "assistant"
  assert "".join(c.choices[0].delta.content or "" for c in chunks) == want
  assert len([c for c in chunks if c.choices[0].delta.content]) > 1     # streamed piece by piece
  assert [c.choices[0].finish_reason for c in chunks][-1] == "length" and all(c.id == chunks[0].id for c in chunks)
  # a stop string cuts the answer before it, streamed or not
  stop = want[len(want) // 2:len(want) // 2 + 2]
  cut = client.chat.completions.create(model="tiny", messages=MSGS, max_tokens=6, temperature=0, stop=stop)
  assert cut.choices[0].message.content == want[:want.index(stop)] and cut.choices[0].finish_reason == "stop"
  streamed = client.chat.completions.create(model="tiny", messages=MSGS, max_tokens=6, temperature=0, stop=[stop], stream=True)
  assert "".join(c.choices[0].delta.content or "" for c in streamed) == want[:want.index(stop)]

def test_models(served):
  _, _, url, client = served
  assert [m.id for m in client.models.list().data] == ["tiny"]
  assert client.models.retrieve("tiny").id == "tiny"
  with pytest.raises(openai.NotFoundError): client.models.retrieve("other")

def _post(url, body: bytes):
  req = urllib.request.Request(url + "/chat/completions", data=body, headers={"Content-Type": "application/json"})
  try:
    with urllib.request.urlopen(req, timeout=30) as r: return r.status, json.loads(r.read())
  except urllib.error.HTTPError as e: return e.code, json.loads(e.read())

@pytest.mark.parametrize("body,status,param", [
  (b"{not json", 400, None),
  (b"[1]", 400, None),
  (b'{"messages": []}', 400, "messages"),
  (b'{"messages": [{"role": "robot", "content": "x"}]}', 400, "messages[0].role"),
  (b'{"messages": [{"role": "user", "content": 3}]}', 400, "messages[0].content"),
  (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}', 400, "max_tokens"),
  (b'{"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}', 400, "temperature"),
  (b'{"messages": [{"role": "user", "content": "x"}], "model": "gpt-9"}', 404, "model"),
  (b'{"messages": [{"role": "user", "content": "' + b"the " * 200 + b'"}]}', 400, "messages"),   # over the context of 128
])
def test_bad_requests_are_4xx_json(served, body, status, param):
  got, err = _post(served[2], body)
  assert got == status and err["error"]["param"] == param and err["error"]["message"]

def test_bad_request_through_the_client(served):
  with pytest.raises(openai.BadRequestError, match="messages must be a non-empty list"):
    served[3].chat.completions.create(model="tiny", messages=[])
  with pytest.raises(openai.NotFoundError): served[3].completions.create(model="tiny", prompt="x")   # no legacy route
