"""Model configuration and the factory (agent/models/factory.py): per-stage endpoints from flexsql.toml
and FLEXSQL_* variables, bad values refused, a clear message when nothing is configured, and each
stage talking to its own endpoint."""

from __future__ import annotations

import pytest

from flexsql.agent.models import ModelUnavailable, configured, model_for_stage, resolve
from flexsql.config import ModelConfig, load_settings
from flexsql.errors import ConfigError
from tests.support.chat import request
from tests.support.openai_stub import OpenAIStub, Reply


def test_model_settings_from_toml_with_stage_overrides(tmp_path, monkeypatch):
    for name in ("FLEXSQL_MODEL__BASE_URL", "FLEXSQL_MODEL__MODEL"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "flexsql.toml"
    config.write_text(
        '[model]\nbase_url = "http://127.0.0.1:8000/v1"\nmodel = "openai/gpt-oss-120b"\n'
        'api_key_env = "VLLM_KEY"\ntemperature = 0.3\nextra_body = { top_k = 20 }\n\n'
        '[model.stages.plan]\nmodel = "Qwen/Qwen3-32B"\ntemperature = 0.9\n'
        "extra_body = { chat_template_kwargs = { enable_thinking = true } }\n"
    )
    settings = load_settings(config)
    assert configured(settings.model)
    plan, link = resolve(settings.model, "plan"), resolve(settings.model, "link")
    assert (plan.model, plan.temperature, plan.base_url) == (
        "Qwen/Qwen3-32B",
        0.9,
        "http://127.0.0.1:8000/v1",
    )
    assert plan.extra_body == {"top_k": 20, "chat_template_kwargs": {"enable_thinking": True}}
    assert (link.model, link.temperature, link.extra_body) == ("openai/gpt-oss-120b", 0.3, {"top_k": 20})
    assert (link.timeout_s, link.max_retries, link.concurrency, link.response_format) == (120, 3, 8, "auto")
    assert model_for_stage(settings.model, "link") is model_for_stage(settings.model, "evaluate")
    assert model_for_stage(settings.model, "plan").name == "openai:Qwen/Qwen3-32B@http://127.0.0.1:8000/v1"
    # flags (--base-url/--model) merge over the file: the rest of [model] stays
    flagged = load_settings(config, model={"base_url": "http://127.0.0.1:9999/v1"}).model
    assert (flagged.base_url, flagged.model, flagged.stages["plan"].model) == (
        "http://127.0.0.1:9999/v1",
        "openai/gpt-oss-120b",
        "Qwen/Qwen3-32B",
    )


def test_model_settings_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEXSQL_MODEL__BASE_URL", "http://127.0.0.1:9000/v1")
    monkeypatch.setenv("FLEXSQL_MODEL__MODEL", "qwen3")
    monkeypatch.setenv("FLEXSQL_MODEL__RESPONSE_FORMAT", "off")
    monkeypatch.setenv("FLEXSQL_MODEL__EXTRA_BODY", '{"chat_template_kwargs": {"enable_thinking": false}}')
    monkeypatch.setenv("FLEXSQL_MODEL__STAGES__EVALUATE__MODEL", "judge")
    config = tmp_path / "flexsql.toml"
    config.write_text("")
    settings = load_settings(config)
    evaluate = resolve(settings.model, "evaluate")
    assert (evaluate.base_url, evaluate.model, evaluate.response_format) == (
        "http://127.0.0.1:9000/v1",
        "judge",
        "off",
    )
    assert evaluate.extra_body == {"chat_template_kwargs": {"enable_thinking": False}}
    assert resolve(settings.model, "plan").model == "qwen3"


def test_unknown_stage_and_bad_values_are_rejected(tmp_path):
    config = tmp_path / "flexsql.toml"
    config.write_text(
        '[model]\nbase_url = "http://x/v1"\nmodel = "m"\n[model.stages.planning]\nmodel = "n"\n'
    )
    with pytest.raises(ConfigError, match="unknown stage planning.*classify, link, knowledge, plan"):
        load_settings(config)
    config.write_text('[model]\nresponse_format = "sometimes"\n')
    with pytest.raises(ConfigError, match="model.response_format"):
        load_settings(config)


def test_nothing_configured_says_what_to_set():
    assert not configured(ModelConfig())
    with pytest.raises(ModelUnavailable) as caught:
        model_for_stage(ModelConfig(), "plan")
    text = str(caught.value)
    assert "[model]" in text and "FLEXSQL_MODEL__BASE_URL" in text
    assert "--base-url" not in text  # reached from `flexsql call ask` and MCP clients too: no flags there
    assert isinstance(caught.value, ConfigError)
    with pytest.raises(ModelUnavailable, match=r"stage plan has no base_url.*\[model.stages.plan\]"):
        resolve(ModelConfig(model="m", stages={"plan": {"temperature": 1.0}}), "plan")


@pytest.mark.anyio
async def test_factory_model_talks_to_the_stage_endpoint():
    with OpenAIStub(lambda req: Reply(content=req.body["model"])) as stub:
        cfg = ModelConfig(base_url=stub.base_url, model="default-m", stages={"plan": {"model": "plan-m"}})
        replies = [
            await model_for_stage(cfg, stage).complete(request(stage=stage)) for stage in ("plan", "link")
        ]
    assert [r.content for r in replies] == ["plan-m", "default-m"]
    assert [r.stage for r in stub.requests] == ["plan", "link"]
