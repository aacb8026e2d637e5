"""From [model] settings to the ChatModel of each stage (per-stage overrides merged over defaults)."""

from __future__ import annotations

import hashlib
import os

from flexsql.agent.models.base import ChatModel, ModelUnavailable, ResolvedModelConfig
from flexsql.agent.models.openai_compat import OpenAICompatModel
from flexsql.config import ModelConfig

# One model object per distinct resolved config, so stages sharing an endpoint share its SDK client
# (connection pool); the concurrency limiter is shared per base_url whatever the config.
_MODELS: dict[str, OpenAICompatModel] = {}


def configured(model_cfg: ModelConfig) -> bool:
    """Whether an endpoint is configured (base_url and model in [model])."""
    return bool(model_cfg.base_url and model_cfg.model)


def resolve(model_cfg: ModelConfig, stage: str) -> ResolvedModelConfig:
    """The settings `stage` runs with: [model.stages.<stage>] over [model]; extra_body dicts merge."""
    merged = model_cfg.model_dump(exclude={"stages"})
    override = model_cfg.stages.get(stage)
    if override is not None:
        for key, value in override.model_dump(exclude_none=True).items():
            merged[key] = {**merged["extra_body"], **value} if key == "extra_body" else value
    missing = [key for key in ("base_url", "model") if not merged.get(key)]
    if missing:
        if configured(model_cfg) or override is None:
            raise ModelUnavailable()
        raise ModelUnavailable(
            f"stage {stage} has no {' or '.join(missing)}: [model.stages.{stage}] sets some fields but "
            f"neither it nor [model] sets {' and '.join(missing)}; add them to [model] in flexsql.toml "
            f"(or FLEXSQL_MODEL__{missing[0].upper()}) or to [model.stages.{stage}]"
        )
    return ResolvedModelConfig(**merged)


def model_for_stage(model_cfg: ModelConfig, stage: str) -> ChatModel:
    cfg = resolve(model_cfg, stage)
    # the key's digest is part of the cache key: a changed variable must not keep the old client
    secret = os.environ.get(cfg.api_key_env, "") if cfg.api_key_env else ""
    key = cfg.model_dump_json() + hashlib.sha256(secret.encode()).hexdigest()
    model = _MODELS.get(key)
    if model is None:
        model = _MODELS[key] = OpenAICompatModel(cfg)
    return model
