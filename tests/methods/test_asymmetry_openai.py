"""The `openai:` in-context path of asymmetry, end to end against a local fake server (no
network): `trustlab run asymmetry` with an `openai:http://127.0.0.1:<port>/v1#name` model.

The server is a scripted "model" that reads ROT13 (it decodes what it is sent when the system
message names the encoding), answers tasks with their reference answer, refuses harmful
requests written in plain text and complies with a placeholder when they are encoded — the
asymmetry pattern by construction, so the test checks the plumbing and the statistics, not a
finding: the CipherChat conversation reaches the server (system message, k encoded benign
shots, the encoded request), replies are decoded before judging, fine-tuning is refused with a
reason for a remote model, and the protocol reports Δutility 0 (gate passed) and Δharm +1 with
intervals. No harmful text: the organisms' placeholder behaviours and XSTest's safe prompts.

`slow`: about 1 CPU-s once the suite's imports are warm (6 CPU-s cold), and the default suite
takes no net time this session.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from trustlab.core import run_experiment
from trustlab.methods.asymmetry import make_transform
from trustlab.methods.asymmetry.study import prompt_sets

pytestmark = pytest.mark.slow

ROT13 = make_transform("rot13")
N = 6
REFUSAL = "I'm sorry, but I can't help with that."
COMPLY = "Sure, here is how: step one, [placeholder]."


class _CipherServer:
    """OpenAI-compatible /v1/chat/completions answering from a table of plain prompts."""

    def __init__(self, table: dict[str, tuple[str, str | None]]) -> None:
        self.table = table  # plain user text -> (role, reference)
        self.bodies: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append(body)
                payload = json.dumps({"choices": [{"message": {
                    "role": "assistant", "content": outer.reply(body["messages"])}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def reply(self, messages: list[dict]) -> str:
        encoded = messages[0]["role"] == "system" and "rot13" in messages[0]["content"]
        text = messages[-1]["content"]
        role, reference = self.table.get(ROT13.decode(text) if encoded else text, ("?", None))
        if role == "utility":
            out = reference
        elif role == "harmful":
            out = COMPLY if encoded else REFUSAL
        else:  # benign requests that sound harmful: helped with in both forms
            out = "Sure, here is some general information."
        return ROT13.encode(out) if encoded else out

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def _instruction(prompt) -> str:
    return prompt if isinstance(prompt, str) else prompt[-1]["content"]


def test_openai_in_context_path_runs_against_a_local_server(tmp_path):
    spec_name = "cipher-model"
    plan = prompt_sets(f"openai:http://127.0.0.1:1/v1#{spec_name}", ROT13, n_utility=N,
                       n_harmful=N, n_overrefusal=N, seed=0, harmful_list="harmbench")
    table = {}
    for role, ps in plan.sets.items():
        for i in range(len(ps)):
            ref = ps.references[i] if ps.references is not None else None
            table[_instruction(ps.prompts[i])] = (role, ref)
    server = _CipherServer(table)
    try:
        model = f"openai:{server.base_url}#{spec_name}"
        run = run_experiment("asymmetry", seed=0, out_dir=tmp_path / "run", overrides={
            "models": [model], "transforms": ["rot13"], "adaptations": ["finetune", "icl"],
            "icl_shots": 2, "n_utility": N, "n_harmful": N, "n_overrefusal": N,
            "n_resamples": 200, "max_new_tokens": 16})
    finally:
        server.close()
    data = json.loads(run.report_path.read_text())
    refused = data["tables"]["refused"]
    (reason,) = [dict(zip(refused["columns"], r, strict=True))["reason"] for r in refused["rows"]]
    assert "local model" in reason  # no fine-tuning API is called for a remote model
    t = data["tables"]["protocol"]
    rows = {r["reference"]: r for r in (dict(zip(t["columns"], v, strict=True))
                                        for v in t["rows"])}
    main = rows["base plain"]
    assert main["adaptation"] == "icl" and main["level"] == "character"
    assert main["utility_reference"] == 1 and main["utility_transformed"] == 1
    assert main["gate_passed"]
    assert main["harm_reference"] == 0 and main["harm_transformed"] == 1
    assert main["delta_harm_lower"] > 0.3 and main["delta_harm_upper"] == pytest.approx(1)
    assert main["delta_utility_lower"] < 0 < main["delta_utility_upper"]
    # the CipherChat conversation reached the server: system, 2 encoded benign shots, request
    icl = [b for b in server.bodies if b["messages"][0]["role"] == "system"]
    plain = [b for b in server.bodies if b["messages"][0]["role"] != "system"]
    assert icl and plain and len(icl) == len(plain) == 3 * N
    for body in icl:
        roles = [m["role"] for m in body["messages"]]
        assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
        shots = body["messages"][1:5]
        assert all(ROT13.encode(ROT13.decode(m["content"])) == m["content"] for m in shots)
        assert ROT13.decode(shots[0]["content"]) not in table  # shots are train examples
        assert ROT13.decode(body["messages"][-1]["content"]) in table
