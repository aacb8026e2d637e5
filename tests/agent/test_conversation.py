"""Conversation state: turns with role-states, the history as messages (unchanged from turn to turn),
clarification hand-over, bounds over long conversations, thread safety and persistence across
processes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from flexsql.agent.conversation import (
    Conversation,
    ConversationStore,
    Turn,
    history,
    pending_clarification,
)
from flexsql.errors import ConfigError, InvalidArgument


def history_messages(conv: Conversation, max_chars: int = 12_000) -> list[dict[str, str]]:
    return history(conv, max_chars)[0]


def turn_note(conv: Conversation) -> str | None:
    return history(conv)[1]


Q1 = "SELECT store, sum(amount) FROM sales WHERE year = 2024 GROUP BY store ORDER BY 2 DESC LIMIT 5"
Q2 = "SELECT store, sum(amount) FROM sales WHERE year = 2024 AND channel = 'online' GROUP BY store ORDER BY 2 DESC LIMIT 5"


def test_a_turn_with_sql_gets_its_role_state() -> None:
    turn = Turn(
        question="which stores sold most in 2024?",
        type="answerable",
        sql=Q1,
        dialect="duckdb",
        result_summary="5 rows: (Lyon, 1200.5), …",
    )
    assert turn.role_state is not None and turn.role_state.role_texts("filter") == ["sales.year = 2024"]
    assert turn.role_state.limit == "5"
    bad = Turn(question="?", sql="SELEC x", dialect="duckdb")
    assert bad.role_state is not None and bad.role_state.error


def test_history_shows_questions_status_sql_role_state_and_the_pending_question() -> None:
    store = ConversationStore()
    store.append(
        "c1",
        Turn(
            question="which stores sold most in 2024?",
            type="answerable",
            sql=Q1,
            dialect="duckdb",
            result_summary="5 rows",
        ),
    )
    store.append("c1", Turn(question="only the online ones", type="answerable", sql=Q2, dialect="duckdb"))
    store.append(
        "c1",
        Turn(
            question="and the best customers?",
            type="ambiguous",
            status="needs_clarification",
            clarifying_question="Best by total spent or by number of orders?",
            readings=["by total spent", "by number of orders"],
        ),
    )
    conv = store.get("c1")
    assert pending_clarification(conv) is conv.turns[-1] or pending_clarification(conv) == conv.turns[-1]
    messages = history_messages(conv)
    assert [m["role"] for m in messages] == ["user", "assistant"] * 3
    assert messages[0]["content"] == "Question: which stores sold most in 2024?"
    assert messages[3]["content"] == f"Answered.\nSQL: {Q2}"  # whole, never cut mid-value
    assert messages[5]["content"] == (
        "I asked: Best by total spent or by number of orders?\nReadings: by total spent | by number of orders"
    )
    note = turn_note(conv)
    assert note is not None and "this message answers it" in note
    assert "The last SQL is turn 2's (above). By role:" in note
    assert (
        "tables: sales; select: sales.store, sum(sales.amount); filter: sales.year = 2024, sales.channel = 'online'"
        in note
    )
    store.append("c1", Turn(question="by total spent", sql=Q1, dialect="duckdb"))
    conv = store.get("c1")
    later = turn_note(conv)
    assert pending_clarification(conv) is None and later is not None and "answers it" not in later
    assert "The last SQL is turn 4's (above)" in later
    # the history a later turn sends starts as the earlier turn's did: a server's cache keeps serving it
    assert history_messages(conv)[:6] == messages


def test_unanswerable_and_improper_turns_are_shown_with_reason_and_reply() -> None:
    store = ConversationStore()
    store.append(
        "c",
        Turn(
            question="their age?",
            type="unanswerable",
            status="unanswerable",
            reason="no column holds a customer's age (customers has name, city, joined)",
        ),
    )
    store.append("c", Turn(question="thanks!", type="improper", status="reply", reply="You're welcome."))
    said = [m["content"] for m in history_messages(store.get("c")) if m["role"] == "assistant"]
    assert said == [
        "Not answerable here: no column holds a customer's age (customers has name, city, joined)",
        "Replied: You're welcome.",
    ]
    assert turn_note(store.get("c")) is None and history_messages(store.get("new")) == []


def test_an_answered_turn_carries_its_reading_result_and_what_it_found() -> None:
    turn = Turn(
        question="and his email?",
        standalone="What is the email of the singer with the most concerts?",
        sql="SELECT email FROM singer WHERE singer_id = 3",
        result_summary="1 row (email): joe@example.org",
        findings=["main.singer.Country = 'France' (4 rows; exact)", "x" * 400],
    )
    assert turn.findings == ["main.singer.Country = 'France' (4 rows; exact)"]  # whole facts only
    store = ConversationStore()
    store.append("c", turn)
    (said,) = [m["content"] for m in history_messages(store.get("c")) if m["role"] == "assistant"]
    assert said.splitlines() == [
        "Answered.",
        "Read as: What is the email of the singer with the most concerts?",
        "SQL: SELECT email FROM singer WHERE singer_id = 3",
        "Result: 1 row (email): joe@example.org",
        "Found: main.singer.Country = 'France' (4 rows; exact)",
    ]


def test_get_returns_a_copy_and_unknown_ids_start_empty() -> None:
    store = ConversationStore()
    assert store.get("fresh").turns == []
    store.append("x", Turn(question="q1"))
    copy = store.get("x")
    copy.turns.append(Turn(question="not stored"))
    assert [t.question for t in store.get("x").turns] == ["q1"]


def test_a_200_turn_conversation_stays_bounded_in_memory_on_disk_and_in_the_prompt(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "conv", max_turns=20, max_chars=30_000)
    long_sql = "SELECT " + ", ".join(f"c{i}" for i in range(150)) + " FROM wide WHERE year = {year}"
    sizes, prompts = [], []
    for n in range(200):
        conv = store.append(
            "long",
            Turn(
                question=f"turn {n}: " + "please " * 100,
                sql=long_sql.format(year=2000 + n),
                dialect="duckdb",
                result_summary="r" * 2000,
            ),
        )
        sizes.append(len(conv.model_dump_json()))
        prompts.append(sum(len(m["content"]) for m in history_messages(conv, max_chars=12_000)))
    conv = store.get("long")
    assert len(conv.turns) <= 20 and conv.dropped + len(conv.turns) == 200
    assert conv.turns[-1].question.startswith("turn 199:")
    assert max(sizes[50:]) <= 30_000 + 6_000  # turns within max_chars, summary within about a sixth of it
    assert max(sizes[100:]) <= max(sizes[30:50]) * 1.05  # no growth after the bound is reached
    assert max(prompts) <= 12_000 + 200
    assert (tmp_path / "conv" / "long.json").stat().st_size < 80_000
    messages = history_messages(conv, max_chars=12_000)
    assert "earlier turns of this conversation not shown" in messages[0]["content"]
    assert "turn 199:" in messages[-2]["content"] and "year = 2199" in messages[-1]["content"]
    assert all(m["content"].count("year = ") <= 1 for m in messages)  # each SQL whole, once
    note = turn_note(conv)
    assert note is not None and "The last SQL is turn 200's (above)" in note


@pytest.mark.integration
def test_persisted_conversation_continues_in_a_later_process(tmp_path: Path) -> None:
    folder = tmp_path / "conversations"
    store = ConversationStore(folder)
    store.append("sales-1", Turn(question="which stores sold most in 2024?", sql=Q1, dialect="duckdb"))
    path = folder / "sales-1.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
    script = (
        "import sys\n"
        "from flexsql.agent.conversation import ConversationStore, Turn\n"
        "store = ConversationStore(sys.argv[1])\n"
        "conv = store.get('sales-1')\n"
        "assert conv.turns[0].role_state.role_texts('filter') == ['sales.year = 2024'], conv\n"
        f"store.append('sales-1', Turn(question='only the online ones', sql={Q2!r}, dialect='duckdb'))\n"
        "print(len(store.get('sales-1').turns))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(folder)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"
    # this process sees what the other one wrote (the file changed under its cache)
    conv = store.get("sales-1")
    assert [t.question for t in conv.turns] == ["which stores sold most in 2024?", "only the online ones"]
    assert ConversationStore(folder).ids() == ["sales-1"]


@pytest.mark.parametrize(
    "bad", ["../escape", "a/b", "", ".hidden", "x" * 200, "a\\b", "name with space", "..", "é"]
)
def test_ids_that_could_leave_the_folder_are_refused(tmp_path: Path, bad: str) -> None:
    store = ConversationStore(tmp_path / "c")
    with pytest.raises(InvalidArgument, match="conversation id .* is not allowed"):
        store.append(bad, Turn(question="q"))
    with pytest.raises(InvalidArgument):
        store.get(bad)
    assert list((tmp_path / "c").iterdir()) == [] and not (tmp_path / "escape.json").exists()


def test_a_damaged_file_is_reported_with_what_to_do(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    store = ConversationStore(folder)
    (folder / "broken.json").write_text("{not json")
    with pytest.raises(ConfigError, match="cannot be read .*delete it"):
        store.get("broken")


def test_concurrent_appends_lose_nothing(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "c", max_turns=500, max_chars=1_000_000)
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for i in range(15):
                store.append(
                    "shared", Turn(question=f"w{k}-{i}", sql=f"SELECT {i} FROM t{k}", dialect="sqlite")
                )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    on_disk = json.loads((tmp_path / "c" / "shared.json").read_text())
    assert len(on_disk["turns"]) == 90 == len(store.get("shared").turns)
    assert sorted(t["question"] for t in on_disk["turns"]) == sorted(
        f"w{k}-{i}" for k in range(6) for i in range(15)
    )
    for k in range(6):  # each thread's turns in its own order
        mine = [t["question"] for t in on_disk["turns"] if t["question"].startswith(f"w{k}-")]
        assert mine == [f"w{k}-{i}" for i in range(15)]


def test_in_memory_store_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = ConversationStore()
    store.append("m", Turn(question="q"))
    assert os.listdir(tmp_path) == [] and store.ids() == ["m"]


APPENDER = """
import sys
from pathlib import Path
from flexsql.agent.conversation import ConversationStore, Turn
store = ConversationStore(Path(sys.argv[1]), max_turns=500, max_chars=10**7)
for i in range(40):
    store.append("shared", Turn(question=f"{sys.argv[2]} {i}"))
"""


@pytest.mark.integration
def test_two_processes_appending_to_one_conversation_keep_every_turn(tmp_path: Path) -> None:
    """Was: last writer wins — a stdio server and `flexsql ask --conversation` appending at the same time
    each wrote the file from what it had read, dropping the other's turns."""
    procs = [
        subprocess.Popen([sys.executable, "-c", APPENDER, str(tmp_path), name]) for name in ("server", "cli")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    turns = ConversationStore(tmp_path, max_turns=500, max_chars=10**7).get("shared").turns
    assert sorted(t.question for t in turns) == sorted(
        f"{n} {i}" for n in ("server", "cli") for i in range(40)
    )
