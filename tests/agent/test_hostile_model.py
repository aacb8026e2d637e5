"""The agent against a hostile model endpoint (issue 21): a real OpenAI-compatible HTTP server on
loopback (tests/support/openai_stub.py) serving what the red team served — malformed bodies, huge
ones, `{}`×N, JSON nested past the parser's depth, 3,000 tool calls in one reply, a drip, the key
echoed back — to the real agent through `ask_question`, `flexsql ask` and the MCP `ask` tool.

What must hold: every malformed reply ends the run `failed` with a reason that says what the
endpoint did (never a traceback, never "internal error … flexsql bug"); the work a reply can cause
is bounded (its size, the parsing, the tool calls it asks for, the trace it leaves, the seconds it
takes); and no secret of the model endpoint reaches anything the agent writes or returns.
"""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp import Client

from flexsql.agent.contract import StageOutputError, parse_output
from flexsql.config import Settings
from flexsql.server.app import build_server
from flexsql.server.cli import main as flexsql_main
from tests.support.agent_support import (
    StageScript,
    ask,
    requests_for,
    settings_for,
)
from tests.support.hostile_model import (
    MALFORMED,
    braces,
    completion,
    content_reply,
    drip,
    echo_headers,
    huge_body,
    nested,
    tool_calls_reply,
)
from tests.support.mcp_support import text_of
from tests.support.openai_stub import OpenAIStub, Raw, Reply, StubRequest

pytestmark = pytest.mark.anyio

QUESTION = "How many orders are there?"
COUNT_SQL = "SELECT count(*) AS n FROM orders"


def well_behaved(**on: Any) -> StageScript:
    return StageScript(plans={"count every order": COUNT_SQL}, on=on)


def trace_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- 1. malformed replies: a clear failure, never a crash -----------------------------------------


@pytest.mark.parametrize("name", list(MALFORMED))
async def test_a_malformed_reply_ends_the_run_failed_with_a_clear_reason(shop, name):
    reply, says = MALFORMED[name]
    with OpenAIStub(lambda req: reply) as stub:
        result = await ask(shop, stub, QUESTION)
    assert result.status == "failed", result
    assert "model endpoint" in result.reason and says.lower() in result.reason.lower(), result.reason
    assert "flexsql bug" not in result.reason


async def test_content_nested_past_the_parser_depth_is_an_unusable_reply(shop):
    with OpenAIStub(lambda req: content_reply(nested())) as stub:
        result = await ask(shop, stub, QUESTION)
    assert result.status == "failed" and "could not be used" in result.reason, result.reason
    fixes = [r.last_user_text for r in stub.requests if "could not be used" in r.last_user_text]
    assert fixes and all("nested" in text for text in fixes), fixes[:1]


async def test_tool_arguments_nested_past_the_parser_depth_get_a_tool_error_and_the_stage_goes_on(shop):
    def link(req: StubRequest) -> Any:
        if not req.has_tool_results:
            return tool_calls_reply([("describe_table", nested())])
        return None  # the default answer

    with OpenAIStub(well_behaved(link=link)) as stub:
        result = await ask(shop, stub, QUESTION)
    assert result.status == "answered", result.reason
    told = requests_for(stub, "link")[1].tool_results
    assert len(told) == 1 and told[0].startswith("invalid_argument") and "nested" in told[0], told


@pytest.mark.parametrize("name", ["non-JSON body", "choices: [{}]", "body nested 1,200 deep"])
def test_flexsql_ask_on_a_malformed_reply_prints_failed_and_exits_1(shop, name):
    reply, says = MALFORMED[name]
    with OpenAIStub(lambda req: reply) as stub:
        result = CliRunner().invoke(
            flexsql_main,
            [
                "ask",
                QUESTION,
                "--db",
                shop.url,
                "--base-url",
                stub.base_url,
                "--model",
                "stub",
                "--plans",
                "1",
            ],
            env={"COLUMNS": "200", "FLEXSQL_MODEL__MAX_RETRIES": "0"},
        )
    assert isinstance(result.exception, SystemExit) and result.exit_code == 1, result.output
    assert result.output.splitlines()[0] == "failed" and says.lower() in result.output.lower()
    assert "Traceback" not in result.output


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize("name", ["non-JSON body", "body nested 1,200 deep", "usage with a string count"])
async def test_mcp_ask_on_a_malformed_reply_answers_failed_not_an_internal_error(shop, mode, name):
    reply, says = MALFORMED[name]
    with OpenAIStub(lambda req: reply) as stub:
        server = build_server(settings_for(stub, model={"max_retries": 0}), shop.sources)
        async with Client(server, mode=mode) as client:
            result = await client.call_tool("ask", {"question": QUESTION})
    text = text_of(result)
    assert "flexsql bug" not in text and "internal" not in text.split(":")[0], text
    out = result.structured_content
    assert out["status"] == "failed" and says.lower() in out["reason"].lower(), out


# -- 2. parsing is bounded ------------------------------------------------------------------------


def test_a_two_megabyte_reply_of_braces_is_refused_by_its_length():
    """`{}`×1M: the parser looks at a bounded window and a bounded number of objects, and tells the
    model why its reply was not read (the red team's reply took 64 s of CPU per parse)."""
    with pytest.raises(StageOutputError) as caught:
        parse_output("classify", braces(2_000_000))
    assert "2,000,000 characters" in str(caught.value), caught.value


def test_an_answer_after_thousands_of_stray_objects_is_still_found():
    stray = "{} " * 5_000 + '{"note": "not it"}\n'
    parsed = parse_output("link", stray + '{"tables": ["orders"], "notes": "n"}')
    assert parsed.model_dump(include={"tables", "notes"}) == {"tables": ["orders"], "notes": "n"}


def test_an_answer_after_fifty_thousand_unclosed_fences_is_still_found():
    """``` openings without a line end: the fence reader was quadratic in them (minutes for this)."""
    reply = "```x" * 50_000 + '\n{"tables": ["orders"], "notes": ""}'
    assert parse_output("link", reply).model_dump(include={"tables", "notes"}) == {
        "tables": ["orders"],
        "notes": "",
    }


async def test_a_reply_of_braces_reaches_the_model_as_a_correction_that_names_its_length(shop):
    # usage as a real server reports it: the stub's estimate (4 characters a token) would spend
    # the question's token budget before the correction
    reply = Reply(content=braces(2_000_000), usage=(1_000, 1_000))
    with OpenAIStub(well_behaved(link=lambda req: reply)) as stub:
        result = await ask(shop, stub, QUESTION)
    assert result.status == "failed" and "could not be used" in result.reason
    fixes = [r.last_user_text for r in requests_for(stub, "link")[1:]]
    assert len(fixes) == 2 and all("2,000,000 characters" in f for f in fixes), fixes
    # the unusable reply goes back with its correction cut to its end, not resent whole
    echoed = [m for r in requests_for(stub, "link")[1:] for m in r.messages if m["role"] == "assistant"]
    assert echoed and all(len(m["content"]) < 25_000 for m in echoed)


# -- 3. tool calls per reply ----------------------------------------------------------------------


async def test_three_thousand_tool_calls_in_one_reply_run_at_most_the_limit(shop, tmp_path):
    calls = [("describe_table", json.dumps({"table": f"t{i}"})) for i in range(3_000)]

    def link(req: StubRequest) -> Any:
        return tool_calls_reply(calls) if not req.has_tool_results else None

    trace = tmp_path / "trace.jsonl"
    with OpenAIStub(well_behaved(link=link)) as stub:
        result = await ask(shop, stub, QUESTION, agent={"plans": 1}, trace_path=trace)
    limit = Settings().agent.tool_calls_per_reply
    assert result.status == "answered", result.reason
    assert result.usage.tool_calls == limit
    answered = requests_for(stub, "link")[1]
    tool_messages = [m for m in answered.messages if m.get("role") == "tool"]
    # the thread keeps the calls that ran, each answered by its tool message as the protocol requires;
    # the last says how many more were not run, so 3,000 calls do not ride on every later request
    (sent,) = [m for m in answered.messages if m.get("tool_calls")]
    assert [c["id"] for c in sent["tool_calls"]] == [f"call_{i}" for i in range(limit)]
    assert [m["tool_call_id"] for m in tool_messages] == [f"call_{i}" for i in range(limit)]
    assert "not run: 2,984 more tool calls" in tool_messages[-1]["content"]
    assert "tool_calls_per_reply" in tool_messages[-1]["content"]
    assert max(len(r.text) for r in stub.requests) < 100_000
    assert sum(1 for e in trace_lines(trace) if e["kind"] == "tool_call") == limit


async def test_megabytes_of_reasoning_per_reply_do_not_ride_on_every_later_request(shop):
    """A model sending 3.5 MB of reasoning with each tool call (issue 30, 4): what goes back is its
    end, at most [agent] reasoning_chars per reply, and only on the tool turns of the step that made
    it; later steps' requests carry none of it, and the question is answered."""
    thinking = "let me think about this very carefully. " * 90_000  # 3.6 MB

    def link(req: StubRequest) -> Any:
        if req.body["tool_choice"] != "auto" or len(req.tool_results) >= 3:
            return None
        return Reply(tool_calls=[("describe_table", {"table": "orders"})], reasoning=thinking)

    with OpenAIStub(well_behaved(link=link)) as stub:
        result = await ask(shop, stub, QUESTION, agent={"plans": 1, "tool_rounds": 4})
    assert result.status == "answered", result.reason
    limit = Settings().agent.reasoning_chars
    sizes = [len(json.dumps(r.body)) for r in stub.requests]
    # three replies' ends, each sent as `reasoning` and as `reasoning_content`: not 10 MB
    assert max(sizes) < 40_000 + 3 * 2 * (limit + 200), sizes
    for req in stub.requests:
        for message in req.messages:
            for key in ("reasoning", "reasoning_content"):
                assert len(message.get(key) or "") <= limit + 100, (req.stage, key)
    after = [r for r in stub.requests if r.stage in ("plan", "implement", "evaluate")]
    assert after and all("think about this" not in json.dumps(r.body) for r in after)


async def test_a_request_past_request_chars_is_not_sent_and_the_run_says_why(shop):
    thinking = "x" * 60_000

    def link(req: StubRequest) -> Any:
        return Reply(tool_calls=[("describe_table", {"table": "orders"})], reasoning=thinking)

    with OpenAIStub(well_behaved(link=link)) as stub:
        result = await ask(
            shop,
            stub,
            QUESTION,
            agent={"plans": 1, "reasoning_chars": 1_000_000, "request_chars": 50_000},
        )
    assert result.status == "failed"
    assert "past [agent] request_chars (50,000)" in result.reason, result.reason
    assert max(len(json.dumps(r.body["messages"])) for r in stub.requests) < 50_000 + 20_000


# -- 4. size: replies and traces ------------------------------------------------------------------


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "no-length"])
async def test_a_reply_over_the_size_cap_is_refused_without_being_read_whole(shop, tmp_path, declared):
    size = 40 << 20  # 40 MB of content, far past the default cap

    def huge(req: StubRequest) -> Raw:
        body = huge_body(size)
        if declared:
            total = size + sum(len(p) for p in json.dumps(completion({"content": "@"})).split("@"))
            return Raw(body, declared=total)
        return Raw(body, length=False)

    trace = tmp_path / "trace.jsonl"
    with OpenAIStub(huge) as stub:
        result = await ask(shop, stub, QUESTION, trace_path=trace)
    assert result.status == "failed" and "max_reply_bytes" in result.reason, result.reason
    assert stub.requests and stub.raw_complete == 0  # no reply was read to its end
    # what the endpoint got into the socket: the bytes read up to the cap, and the kernel's buffers
    assert stub.raw_bytes_sent < len(stub.requests) * size // 2
    assert trace.stat().st_size < 1 << 20


async def test_the_trace_of_a_question_is_cut_at_trace_bytes_and_says_so(shop, tmp_path):
    """Every reply carries 3 MB of reasoning (under the reply cap): the trace keeps the first ones,
    then summaries, says it was cut, and still ends with the answer."""
    thinking = "hmm " * 750_000

    def verbose(req: StubRequest) -> Any:
        reply = well_behaved()(req)
        return Reply(content=reply, reasoning=thinking) if isinstance(reply, dict) else reply

    trace = tmp_path / "trace.jsonl"
    with OpenAIStub(verbose) as stub:
        result = await ask(shop, stub, QUESTION, agent={"plans": 2}, trace_path=trace)
    assert result.status == "answered", result.reason
    cap = Settings().agent.trace_bytes
    assert len(stub.requests) * len(thinking) > cap + cap // 2  # what an uncut trace would have held
    assert trace.stat().st_size <= cap + 256 * 1024
    events = trace_lines(trace)
    cut = [e for e in events if e["kind"] == "trace_cut"]
    assert cut and cut[0]["limit_bytes"] == cap
    assert events[-1]["kind"] in ("answer", "trace_cut") and any(e["kind"] == "answer" for e in events)
    assert any(e["kind"] == "reply" and e.get("cut") for e in events)  # summarised, not dropped


async def test_old_traces_are_pruned_by_bytes_as_well_as_count(shop, tmp_path, monkeypatch):
    """The MCP `ask` tool keeps traces in the user cache: past [agent] traces_bytes in total the
    oldest go, however few they are."""
    monkeypatch.setenv("FLEXSQL_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "cache" / "traces"
    folder.mkdir(parents=True)
    total = Settings().agent.traces_bytes
    old = []
    for i in range(3):  # three sparse files, each half the total: together past it
        path = folder / f"old{i}.jsonl"
        with open(path, "wb") as fh:
            fh.truncate(total // 2)
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
        old.append(path)
    with OpenAIStub(well_behaved()) as stub:
        server = build_server(settings_for(stub), shop.sources)
        async with Client(server) as client:
            result = await client.call_tool("ask", {"question": QUESTION})
    out = result.structured_content
    assert out["status"] == "answered" and Path(out["trace"]).parent == folder
    left = list(folder.glob("*.jsonl"))
    assert sum(p.stat().st_size for p in left) <= total
    assert not old[0].exists() and old[2].exists() and Path(out["trace"]) in left


# -- 5. time: the whole request is cut at timeout_s -----------------------------------------------


@pytest.mark.integration
async def test_a_reply_dripped_a_byte_at_a_time_is_cut_at_timeout_s(shop):
    """Every byte arrives in time for a per-read timeout; the request as a whole does not."""
    body = json.dumps(completion({"role": "assistant", "content": '{"type": "answerable"}'})).encode()
    with OpenAIStub(lambda req: drip(body, every_s=0.05)) as stub:
        result = await ask(
            shop, stub, QUESTION, model={"timeout_s": 1.0, "max_retries": 0}, agent={"max_seconds": 30.0}
        )
    assert result.status == "failed", result
    assert "did not answer within 1 s" in result.reason and "timeout_s" in result.reason, result.reason
    assert result.budget_exhausted is None  # not the question's budget: the request's own limit
    assert stub.raw_complete == 0


# -- 6. secrets -----------------------------------------------------------------------------------

KEY = 'sk-hostile-"quoted"-back\\slash-5e1f0a9c'
KEY_ENV = "FLEXSQL_TEST_HOSTILE_KEY"
URL_USER, URL_PASSWORD = "svc", 'pw"with\\odd-7d2c91'


def secret_forms(secret: str) -> list[str]:
    """A secret as raw text, JSON-escaped (once and twice) and base64: every way it could be written."""
    once = json.dumps(secret)[1:-1]
    return [
        secret,
        once,
        json.dumps(once)[1:-1],
        base64.b64encode(secret.encode()).decode(),
    ]


def leaks(text: str, secrets: list[str]) -> list[str]:
    return [form for secret in secrets for form in secret_forms(secret) if form in text]


def echoing(req: StubRequest) -> Any:
    """A well-behaved model that echoes the request's Authorization header, and the key, everywhere
    a reply can: the classify reason, reasoning, tool arguments, the plan, the SQL."""
    auth = echo_headers(req)
    said = f"auth was {auth}; key {KEY}; password {URL_PASSWORD}"
    if req.stage == "classify":
        return Reply(content={"type": "answerable", "reason": said}, reasoning=said)
    if req.stage == "link" and not req.has_tool_results:
        return Reply(tool_calls=[("describe_table", {"table": "orders", "note": said})], reasoning=said)
    if req.stage == "plan":
        return {"plans": [{"reading": said, "text": "count every order", "tables": ["orders"]}]}
    if req.stage == "implement":
        literal = said.replace("'", "''")
        return {"language": "sql", "code": f"SELECT count(*) AS n, '{literal}' AS said FROM orders"}
    if req.stage == "evaluate":
        return {"verdict": "ok", "feedback": said}
    return well_behaved()(req)


def unanswerable_echo(req: StubRequest) -> Any:
    said = f"auth was {echo_headers(req)}; key {KEY}; password {URL_PASSWORD}"
    return {"type": "unanswerable", "reason": said, "clarifying_question": None, "reply": None}


@pytest.fixture(params=["bearer-key", "url-credentials"])
def credentials(request: pytest.FixtureRequest, monkeypatch) -> dict[str, Any]:
    """How the endpoint is authenticated: a key in an environment variable (sent as Bearer), or
    user:password in base_url (sent as HTTP Basic, base64)."""
    monkeypatch.setenv(KEY_ENV, KEY)
    if request.param == "bearer-key":
        return {"model": {"api_key_env": KEY_ENV}, "secrets": [KEY], "basic": False}
    userinfo = f"{URL_USER}:{URL_PASSWORD}"
    return {
        "model": {"api_key_env": KEY_ENV},
        "secrets": [KEY, URL_PASSWORD, userinfo],
        "basic": True,
        "userinfo": userinfo,
    }


def with_userinfo(base_url: str, credentials: dict[str, Any]) -> str:
    if not credentials["basic"]:
        return base_url
    from urllib.parse import quote

    user, password = credentials["userinfo"].split(":", 1)
    return base_url.replace("http://", f"http://{quote(user)}:{quote(password, safe='')}@")


async def test_a_key_echoed_in_replies_reaches_no_answer_nor_trace(shop, tmp_path, credentials):
    trace = tmp_path / "trace.jsonl"
    trace.write_text("an older trace\n")
    trace.chmod(0o644)
    with OpenAIStub(echoing) as stub:
        model = {**credentials["model"], "base_url": with_userinfo(stub.base_url, credentials)}
        result = await ask(shop, stub, QUESTION, agent={"plans": 1}, model=model, trace_path=trace)
    sent = {r.headers.get("authorization", "") for r in stub.requests}
    if credentials["basic"]:  # the endpoint did get the secrets it echoes
        assert sent == {"Basic " + base64.b64encode(credentials["userinfo"].encode()).decode()}
    else:
        assert sent == {f"Bearer {KEY}"}
    assert result.status == "answered", result.reason
    assert result.rows and result.rows[0][0] == shop.orders and "***" in result.rows[0][1]
    secrets = credentials["secrets"]
    assert not leaks(result.model_dump_json(), secrets) and not leaks(result.to_text(), secrets)
    assert not leaks(trace.read_text(encoding="utf-8"), secrets)
    assert stat.S_IMODE(trace.stat().st_mode) == 0o600  # reused, and made private


def test_flexsql_ask_with_an_echoing_endpoint_prints_and_stores_no_secret(shop, tmp_path, credentials):
    conversations = tmp_path / "conversations"
    trace = tmp_path / "trace.jsonl"
    trace.write_text("")
    trace.chmod(0o644)
    outputs = []
    with OpenAIStub(unanswerable_echo) as stub:
        base_url = with_userinfo(stub.base_url, credentials)
        for extra in (["--trace", str(trace)], ["--json"]):
            result = CliRunner().invoke(
                flexsql_main,
                ["ask", QUESTION, "--db", shop.url, "--base-url", base_url, "--model", "stub"]
                + ["--api-key-env", KEY_ENV, "--conversation", "c1", *extra],
                env={"COLUMNS": "200", "FLEXSQL_AGENT__CONVERSATIONS_DIR": str(conversations)},
            )
            assert result.exit_code == 0, result.output
            outputs.append(result.output)
    assert "unanswerable" in outputs[0] and json.loads(outputs[1])["status"] == "unanswerable"
    assert "***" in outputs[0] and "***" in json.loads(outputs[1])["reason"]
    files = [trace, *conversations.iterdir()]
    secrets = credentials["secrets"]
    for output in outputs:
        assert not leaks(output, secrets), leaks(output, secrets)
    for path in files:
        assert not leaks(path.read_text(encoding="utf-8"), secrets), path
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_mcp_ask_with_an_echoing_endpoint_returns_no_secret(shop, mode, credentials):
    with OpenAIStub(unanswerable_echo) as stub:
        model = {**credentials["model"], "base_url": with_userinfo(stub.base_url, credentials)}
        server = build_server(settings_for(stub, model=model), shop.sources)
        async with Client(server, mode=mode) as client:
            result = await client.call_tool("ask", {"question": QUESTION})
    out = result.structured_content
    assert out["status"] == "unanswerable" and "***" in out["reason"]
    secrets = credentials["secrets"]
    assert not leaks(text_of(result), secrets) and not leaks(json.dumps(out), secrets)
    trace = Path(out["trace"])
    assert not leaks(trace.read_text(encoding="utf-8"), secrets)
    assert stat.S_IMODE(trace.stat().st_mode) == 0o600


def test_eval_outputs_of_an_echoing_endpoint_hold_no_secret_and_are_private(spider, tmp_path, monkeypatch):
    from tests.support.evals import run_cli

    monkeypatch.setenv(KEY_ENV, KEY)
    tasks, dbs = spider
    out = tmp_path / "out"

    def script(req: StubRequest) -> Any:
        if req.stage == "classify":
            return {"type": "answerable"}
        if req.stage == "link":
            return {"tables": ["singer"], "notes": f"key {KEY}"}
        if req.stage == "plan":
            return {"plans": [{"reading": f"key {KEY}", "text": "count singers", "tables": ["singer"]}]}
        if req.stage == "implement":
            return {"language": "sql", "code": "SELECT count(*) FROM singer"}
        return {"verdict": "ok", "feedback": f"auth {echo_headers(req)}"}

    with OpenAIStub(script) as stub:
        code, output = run_cli(
            tasks,
            "--runner",
            "builtin",
            "--dbs",
            dbs,
            "--out",
            out,
            "--base-url",
            stub.base_url,
            "--model",
            "stub",
            "--api-key-env",
            KEY_ENV,
            "--plans",
            "1",
            "-q",
        )
    assert code == 0, output
    assert not leaks(output, [KEY])
    written = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "results.jsonl" for p in written) and any(p.name == "trace.jsonl" for p in written)
    for path in written:
        assert not leaks(path.read_text(encoding="utf-8", errors="replace"), [KEY]), path
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


@pytest.fixture
def spider(tmp_path: Path) -> tuple[Path, Path]:
    from tests.support.evals import QUESTIONS, make_db

    make_db(tmp_path / "dbs" / "concert_singer" / "concert_singer.sqlite")
    tasks = tmp_path / "dev.json"
    tasks.write_text(
        json.dumps([{"db_id": "concert_singer", "question": q, "query": s} for q, s in QUESTIONS[:1]])
    )
    return tasks, tmp_path / "dbs"
