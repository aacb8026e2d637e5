"""The prompt templates: rendering rules, and the same prompts served over MCP (prompts/list, prompts/get)."""

from __future__ import annotations

import re

import pytest

from flexsql import prompts
from flexsql.errors import InvalidArgument, NotFoundError
from flexsql.prompts import _parse
from tests.support.prompts import EXPECTED, LEFTOVER, every_argument, required_only


def test_the_six_prompts_exist_with_question_required() -> None:
    templates = prompts.list_prompts()
    assert {t.name for t in templates} == EXPECTED
    for t in templates:
        assert t.description and t.title
        assert "question" in t.required, t.name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_optional_sections_disappear_when_their_argument_is_missing(name: str) -> None:
    t = prompts.get_prompt(name)
    text = prompts.render(name, **required_only(t))
    for arg in t.arguments:
        assert (f"<{arg.name.upper()} VALUE>" in text) == arg.required, arg.name
    assert not LEFTOVER.search(text), LEFTOVER.search(text)
    assert "\n\n\n" not in text


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_argument_appears_when_given(name: str) -> None:
    t = prompts.get_prompt(name)
    text = prompts.render(name, **every_argument(t))
    for arg in t.arguments:
        assert f"<{arg.name.upper()} VALUE>" in text, arg.name
    assert not LEFTOVER.search(text)
    # blank optional arguments count as missing: same text as leaving them out
    blanks = {a.name: "  " for a in t.arguments if not a.required}
    assert prompts.render(name, **required_only(t), **blanks) == prompts.render(name, **required_only(t))


def test_values_are_inserted_verbatim_never_rescanned() -> None:
    program = "SELECT '{question}' AS x, '{\"a\": 1}' AS j -- {#plan}{/plan} {{"
    text = prompts.render("repair", question="Q?", program=program, error="Binder Error: {plan}")
    assert program in text
    assert "Binder Error: {plan}" in text


def test_missing_required_arguments_are_named_with_the_signature() -> None:
    with pytest.raises(InvalidArgument) as info:
        prompts.render("repair", question="Why?")
    message = str(info.value)
    assert "'program'" in message and "'error'" in message and "'question'" not in message.split("Its")[0]
    assert "question, program, error, plan?" in message
    with pytest.raises(InvalidArgument, match="'plan'.* is empty"):
        prompts.render("implement", question="q", plan="   ")


def test_unknown_argument_gets_a_did_you_mean() -> None:
    with pytest.raises(InvalidArgument, match="no argument 'qestion'; did you mean 'question'"):
        prompts.render("plan", qestion="How many orders?")
    with pytest.raises(NotFoundError, match="did you mean 'verify'"):
        prompts.render("verfy", question="q")


def test_non_string_values_are_rendered_as_text() -> None:
    text = prompts.render("verify", question="How many?", result=42)
    assert "Result:\n42" in text


@pytest.mark.parametrize(
    ("body", "args", "problem"),
    [
        ("Q: {question} {typo}", "  question: required | q", "{typo} is not a declared argument"),
        ("Q: {question} {notes}", "  question: required | q\n  notes: optional | n", "must sit inside"),
        ("Q: {question}", "  question: required | q\n  notes: optional | n", "unused arguments: notes"),
        ("Q: {question} {#question}x{/question}", "  question: required | q", "would always show"),
        ("Q: {question} a { b", "  question: required | q", "unmatched brace"),
        (
            "Q: {question}\n{#notes}{other}{/notes}",
            "  question: required | q\n  notes: optional | n\n  other: optional | o",
            "inside the block of 'notes'",
        ),
    ],
)
def test_template_mistakes_are_caught_when_loading(body: str, args: str, problem: str) -> None:
    raw = f"---\ndescription: d\narguments:\n{args}\n---\n{body}\n"
    with pytest.raises(ValueError, match=re.escape(problem)):
        _parse("broken", raw)


ALL_TOOLS = frozenset(
    {
        "search_schema",
        "describe_table",
        "distinct_values",
        "find_values",
        "find_join_path",
        "list_tables",
        "run_query",
        "run_python",
        "validate_sql",
        "sample_rows",
        "profile_column",
        "compare_results",
    }
)
CLIENT_FORMATS = ["STATUS:", "VERDICT:", "result_id: <", "PLAN_PROBLEM", "cause: <", "wrong: <", "Write 2–8"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_prompt_asks_for_its_text_format_once(name: str) -> None:
    """MCP clients answer these prompts in text: each asks for its own format, and none for the
    agent's JSON objects (the agent has its own requests: docs/contract.md)."""
    t = prompts.get_prompt(name)
    client = prompts.render(name, **required_only(t))
    assert any(marker in client for marker in CLIENT_FORMATS + ["Plan N —"]), name
    assert "In the JSON object" not in client
    assert not LEFTOVER.search(client) and "\n\n\n" not in client


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_tool_the_reader_lacks_is_never_named(name: str) -> None:
    t = prompts.get_prompt(name)
    for tool in prompts.tool_sections(t.body):
        text = prompts.render(name, tools=ALL_TOOLS - {tool}, **required_only(t))
        assert f"{tool}(" not in text, (name, tool)
    every = prompts.render(name, tools=ALL_TOOLS, **required_only(t))
    assert all(f"{tool}(" in every for tool in prompts.tool_sections(t.body) if tool != "run_python"), name


def test_without_run_python_implement_asks_for_sql_only_and_with_it_for_a_choice() -> None:
    t = prompts.get_prompt("implement")
    text = prompts.render("implement", tools=ALL_TOOLS - {"run_python"}, **required_only(t))
    assert "run_python" not in text and "1. Write SQL: this server runs no Python programs" in text
    every = prompts.render("implement", **required_only(t))  # a reader with every tool
    assert "1. Choose the language." in every and "runs no Python programs" not in every


def test_implement_says_an_array_path_is_no_sql() -> None:
    """The tools print `hits[].page.pagePath`; a model that writes it into SQL fails: the rule says to unnest."""
    t = prompts.get_prompt("implement")
    for tools in (ALL_TOOLS, frozenset()):
        text = prompts.render("implement", tools=tools, **required_only(t))
        assert "`[]`" in text and "is not SQL" in text and "unnest the array" in text
