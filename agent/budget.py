"""A question's budget: model calls, tokens and seconds. Charged by every model call; when it runs
out the pipeline stops starting work and answers with the best candidate so far, marked so."""

from __future__ import annotations

import threading
import time

from pydantic import BaseModel

from flexsql.errors import BudgetExceeded


class Spent(BaseModel):
    model_calls: int = 0
    tool_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, served from the endpoint's prefix cache
    seconds: float = 0.0

    def usage_text(self) -> str:
        """The tokens as "12,400 prompt (85% cached) + 900 completion": the cached share only where the endpoint
        reported one (vLLM with --enable-prompt-tokens-details, OpenAI)."""
        cached = (
            f" ({self.cached_prompt_tokens / self.prompt_tokens:.0%} cached)"
            if self.prompt_tokens and self.cached_prompt_tokens
            else ""
        )
        return f"{self.prompt_tokens:,} prompt{cached} + {self.completion_tokens:,} completion"


class Budget:
    def __init__(self, max_model_calls: int, max_tokens: int, max_seconds: float) -> None:
        self.max_model_calls = max_model_calls
        self.max_tokens = max_tokens
        self.max_seconds = max_seconds
        self._start = time.monotonic()
        self._lock = threading.Lock()
        self.spent = Spent()
        self.exhausted: str | None = None  # what ran out first
        self._in_flight = 0  # model calls started (start_call) and not yet charged

    @property
    def seconds_left(self) -> float:
        return self.max_seconds - (time.monotonic() - self._start)

    def check(self) -> None:
        """Raise BudgetExceeded if anything ran out."""
        with self._lock:
            self._check_locked()

    def start_call(self) -> None:
        """Check, then reserve one model call until charge() or release(): plans run
        concurrently, and a check alone would let every plan waiting on it through at once."""
        with self._lock:
            self._check_locked()
            self._in_flight += 1

    def release(self) -> None:
        """Give back the reservation of a call that did not complete (failed or cancelled)."""
        with self._lock:
            self._in_flight = max(0, self._in_flight - 1)

    def _check_locked(self) -> None:
        why = None
        if self.spent.model_calls + self._in_flight >= self.max_model_calls:
            why = f"{self.max_model_calls} model calls"
        elif self.spent.prompt_tokens + self.spent.completion_tokens >= self.max_tokens:
            why = f"{self.max_tokens:,} tokens"
        elif self.seconds_left <= 0:
            why = f"{self.max_seconds:g} s"
        if why:
            self.exhausted = self.exhausted or why
            raise BudgetExceeded(
                f"the question's budget of {why} is spent; raise [agent] max_model_calls / "
                "max_tokens / max_seconds for more"
            )

    def charge(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> None:
        with self._lock:
            self._in_flight = max(0, self._in_flight - 1)
            self.spent.model_calls += 1
            self.spent.prompt_tokens += prompt_tokens
            self.spent.completion_tokens += completion_tokens
            self.spent.cached_prompt_tokens += min(cached_tokens, prompt_tokens)

    def tool_call(self) -> None:
        with self._lock:
            self.spent.tool_calls += 1

    def snapshot(self) -> Spent:
        with self._lock:
            return self.spent.model_copy(update={"seconds": round(time.monotonic() - self._start, 3)})
