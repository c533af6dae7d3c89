"""Chat backends: local HF, OpenAI-compatible HTTP (against a server started here), scripted."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch
from lm_testkit import random_prompts

from trustlab import lm
from trustlab.core.errors import DataError, InputError
from trustlab.lm.chat import parse_openai_spec

MAX_REQUESTS = 200  # the test server refuses more than this many requests


class _Server:
    """A small OpenAI-compatible server whose next replies follow a plan of behaviours."""

    def __init__(self) -> None:
        self.plan: list[str] = []
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        # events, not sleeps: a "sleep" reply is held until `wake` is set (by the next test's
        # set-up, or after 30 s), and "slow" replies wait until two are in flight (or 30 s), so
        # what the tests assert does not depend on the machine's load
        self.wake = threading.Event()
        self.pair = threading.Condition(self.lock)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                with outer.lock:
                    outer.requests.append(body)
                    behaviour = outer.plan.pop(0) if outer.plan else "ok"
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                    outer.pair.notify_all()
                try:
                    status, payload = outer.respond(body, behaviour)
                finally:
                    # leave "in flight" before replying: a client may send its next request
                    # as soon as it reads this reply, before a later decrement would run
                    with outer.lock:
                        outer.in_flight -= 1
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def respond(self, body, behaviour) -> tuple[int, bytes]:
        if len(self.requests) > MAX_REQUESTS:
            behaviour = "503"
        if behaviour == "sleep":
            self.wake.wait(30.0)
            behaviour = "ok"
        if behaviour == "slow":  # overlap with a second request if the client sends one
            with self.pair:
                self.pair.wait_for(lambda: self.in_flight >= 2 or not self.plan, timeout=30.0)
            behaviour = "ok"
        if behaviour in ("500", "503", "400"):
            payload, status = b'{"error": "scripted failure"}', int(behaviour)
        elif behaviour == "malformed":
            payload, status = b'{"choices": [ {"message": ', 200
        elif behaviour == "no_content":
            payload, status = json.dumps({"choices": [{"message": {}}]}).encode(), 200
        else:
            last = body["messages"][-1]["content"]
            reply = f"echo {last} t={body['temperature']} seed={body['seed']}"
            payload = json.dumps(
                {"choices": [{"message": {"role": "assistant", "content": reply}}]}
            ).encode()
            status = 200
        return status, payload

    def close(self):
        self.wake.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture(scope="module")
def server():
    srv = _Server()
    yield srv
    srv.close()


@pytest.fixture
def fresh(server):
    server.wake.set()  # release handlers still held by a timeout test, and let them finish
    deadline = time.monotonic() + 30.0
    while server.in_flight and time.monotonic() < deadline:
        time.sleep(0.02)
    server.wake.clear()
    server.plan.clear()
    server.requests.clear()
    server.max_in_flight = 0
    return server


def _client(server, tmp_path, **kwargs):
    options = {"cache_dir": tmp_path / "cache", "timeout": 5.0, "max_retries": 2, "backoff": 0.01}
    options.update(kwargs)
    return lm.OpenAIChatModel(server.base_url, "tiny-model", **options)


def _cache_files(tmp_path):
    return sorted(p for p in (tmp_path / "cache").rglob("*") if p.is_file())


def test_http_roundtrip_and_cache_makes_reruns_free(fresh, tmp_path):
    client = _client(fresh, tmp_path)
    convs = ["hello", [{"role": "system", "content": "s"}, {"role": "user", "content": "bye"}]]
    first = client.generate(convs, max_new_tokens=5, temperature=0.0, seed=7)
    assert first == ["echo hello t=0.0 seed=7", "echo bye t=0.0 seed=7"]
    assert fresh.requests[0]["max_tokens"] == 5 and fresh.requests[0]["model"] == "tiny-model"
    assert len(_cache_files(tmp_path)) == 2
    n_sent = len(fresh.requests)
    again = _client(fresh, tmp_path).generate(convs, max_new_tokens=5, temperature=0.0, seed=7)
    assert again == first and len(fresh.requests) == n_sent  # served from disk
    other = client.generate(["hello"], max_new_tokens=5, temperature=0.0, seed=8)
    assert other == ["echo hello t=0.0 seed=8"] and len(fresh.requests) == n_sent + 1
    entry = json.loads(_cache_files(tmp_path)[0].read_text())
    assert set(entry) == {"request", "reply"}


def test_http_retries_a_500_then_succeeds(fresh, tmp_path):
    fresh.plan.extend(["500", "503"])
    reply = _client(fresh, tmp_path).generate(["hi"])
    assert reply == ["echo hi t=0.0 seed=0"] and len(fresh.requests) == 3


def test_http_gives_up_after_retries_and_caches_nothing(fresh, tmp_path):
    fresh.plan.extend(["500"] * 3)
    with pytest.raises(lm.ChatBackendError, match="HTTP 500") as info:
        _client(fresh, tmp_path, max_retries=2).generate(["hi"])
    assert "\n" not in str(info.value)
    assert len(fresh.requests) == 3 and not _cache_files(tmp_path)


def test_http_client_errors_are_not_retried(fresh, tmp_path):
    fresh.plan.append("400")
    with pytest.raises(lm.ChatBackendError, match="HTTP 400"):
        _client(fresh, tmp_path).generate(["hi"])
    assert len(fresh.requests) == 1


def test_http_timeout_is_a_clear_error_then_retry_recovers(fresh, tmp_path):
    fresh.plan.append("sleep")
    start = time.monotonic()
    with pytest.raises(lm.ChatBackendError, match="timed out"):
        _client(fresh, tmp_path, timeout=0.2, max_retries=0).generate(["hi"])
    # the reply is held until the next test starts: the client gave up at its own timeout
    assert time.monotonic() - start < 15.0 and not _cache_files(tmp_path)
    fresh.plan.append("sleep")  # held: the first attempt times out, the retry gets its reply
    # within 1 s (not 0.2: on a loaded machine the retry's own reply could take longer)
    assert _client(fresh, tmp_path, timeout=1.0, max_retries=1).generate(["hi"]) == [
        "echo hi t=0.0 seed=0"
    ]


@pytest.mark.parametrize("behaviour", ["malformed", "no_content"])
def test_http_malformed_body_is_a_data_error_without_cache_entry(fresh, tmp_path, behaviour):
    fresh.plan.append(behaviour)
    with pytest.raises(DataError, match="malformed"):
        _client(fresh, tmp_path).generate(["hi"])
    assert len(fresh.requests) == 1 and not _cache_files(tmp_path)
    assert not list((tmp_path / "cache").rglob("*.tmp"))


def test_http_concurrency_is_limited(fresh, tmp_path):
    fresh.plan.extend(["slow"] * 8)
    client = _client(fresh, tmp_path, max_concurrency=2, cache_dir=None)
    replies = client.generate([f"q{i}" for i in range(8)])
    assert replies == [f"echo q{i} t=0.0 seed=0" for i in range(8)]  # order kept
    assert fresh.max_in_flight == 2


def test_openai_spec_parsing(server):
    assert parse_openai_spec("openai:http://h:8000/v1#qwen-7b") == ("http://h:8000/v1", "qwen-7b")
    for bad in ["openai:http://h:8000/v1", "openai:h:8000#m"]:
        with pytest.raises(InputError):
            parse_openai_spec(bad)
    model = lm.chat_model(f"openai:{server.base_url}#m", cache_dir=None)
    assert isinstance(model, lm.OpenAIChatModel) and isinstance(model, lm.ChatModel)


def test_hf_chat_greedy_is_batch_invariant_and_deterministic(llama):
    prompts = random_prompts(5, seed=50)
    batched = lm.HFChatModel(llama, batch_size=5).generate(prompts, max_new_tokens=6)
    single = lm.HFChatModel(llama, batch_size=1).generate(prompts, max_new_tokens=6)
    assert batched == single
    assert all(isinstance(r, str) for r in batched)


def test_hf_chat_sampling_is_seeded_and_leaves_global_rng_alone(gpt2):
    chat = lm.chat_model(gpt2.spec)
    prompts = random_prompts(4, seed=51)
    state = torch.get_rng_state()
    a = chat.generate(prompts, max_new_tokens=8, temperature=1.0, seed=1)
    assert torch.equal(torch.get_rng_state(), state)
    assert a == chat.generate(prompts, max_new_tokens=8, temperature=1.0, seed=1)
    assert a != chat.generate(prompts, max_new_tokens=8, temperature=1.0, seed=2)


def test_hf_chat_applies_interventions(llama):
    prompts = random_prompts(4, seed=52)
    chat = lm.HFChatModel(llama)
    plain = chat.generate(prompts, max_new_tokens=6)
    zero = chat.with_interventions(
        lm.AddVector(torch.zeros(llama.d_model), llama.sites("resid_pre"))
    )
    assert zero.generate(prompts, max_new_tokens=6) == plain
    push = chat.with_interventions(
        lm.AddVector(torch.randn(llama.d_model) * 50, llama.sites("resid_pre"))
    )
    assert push.generate(prompts, max_new_tokens=6) != plain


def test_scripted_double_answers_and_records():
    by_map = lm.ScriptedChatModel({"hi": "hello"}, default="?")
    assert by_map.generate(["hi", "other"], max_new_tokens=3) == ["hello", "?"]
    assert by_map.calls[0]["max_new_tokens"] == 3
    in_order = lm.ScriptedChatModel(["a", "b"])
    assert in_order.generate(["x", "y"]) == ["a", "b"]
    with pytest.raises(InputError, match="ran out"):
        in_order.generate(["z"])
    by_fn = lm.ScriptedChatModel(lambda conv: conv[-1]["content"].upper())
    assert by_fn.generate([[{"role": "user", "content": "up"}]]) == ["UP"]
    with pytest.raises(InputError):
        lm.ScriptedChatModel({}).generate(["nope"])
    with pytest.raises(InputError):
        by_fn.generate("a single string is not a list of conversations")


def test_http_sends_image_parts_as_data_urls_and_keys_the_cache_on_them(fresh, tmp_path):
    from trustlab.vision import image_sha256, neutral_image

    red, blue = neutral_image(1, size=8), neutral_image(2, size=8)
    client = _client(fresh, tmp_path)
    convs = [[lm.user_message("what colour", images=[img])] for img in (red, blue)]
    client.generate(convs, max_new_tokens=3)
    parts = [r["messages"][0]["content"] for r in fresh.requests]
    assert all(p[0]["type"] == "image_url" and p[1] == {"type": "text", "text": "what colour"}
               for p in parts)  # fmt: skip
    urls = sorted(p[0]["image_url"]["url"] for p in parts)
    assert sorted(image_sha256(u) for u in urls) == sorted(image_sha256(i) for i in (red, blue))
    assert len(_cache_files(tmp_path)) == 2  # two images, two keys
