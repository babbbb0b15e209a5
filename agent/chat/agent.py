"""The free-text chat agent: answers messages with a pydantic-ai agent (memory, tools, budgets, model fallback)
and settles the confirmations its monitor proposals open."""

from __future__ import annotations

import logging
from datetime import timedelta

from pydantic_ai import Agent, RunContext, RunUsage, UsageLimits
from pydantic_ai.exceptions import UnexpectedModelBehavior, UsageLimitExceeded
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models import Model

from agent.budget import ChatBudget, run_cost_usd
from agent.chat.deps import ChatDeps
from agent.chat.instructions import RULES, chat_context
from agent.chat.llm import RetryPolicy, chat_model, failure_message, is_model_failure
from agent.chat.summary import summarise
from agent.chat.tools import CHAT_TOOLS
from agent.confirmations import (
    CANCEL_PREFIX,
    CONFIRM_PREFIX,
    DEFAULT_CONFIRMATION_TTL,
    ConfirmationBook,
    PendingConfirmation,
    answer_of,
    execute_actions,
)
from agent.context import Services, Turn, chat_timezone
from agent.memory import ConversationMemory, conversation_memory, memory_for
from agent.messages import Button, Reply
from monitors import new_error_id
from research import estimate_cost_usd

__all__ = ["ChatAgent", "build_chat_agent"]

logger = logging.getLogger(__name__)

MAX_PROMPT_CHARS = 8000
"""A longer message is cut: the per-message token limit would end the run anyway, with a less useful message."""

EXPIRED_MESSAGE = (
    "That confirmation is no longer open (it expired or was already answered). Ask me again if you still want it."
)
NOT_YOURS_MESSAGE = "Only the person who asked for this change can confirm or cancel it."
CANCELLED_MESSAGE = "Cancelled; nothing was changed."
TOO_LONG_MESSAGE = (
    "That needed more steps or tokens than I allow for one message. Try a narrower question, or use a command "
    "like /search or /collect for big jobs."
)
BAD_MODEL_ANSWER = "The language model gave an answer I couldn't use. Please rephrase and try again."
NO_MODEL_REMINDER = "(Free text needs a language model, which is not configured; commands work — see /help.)"


def _chat_context(ctx: RunContext[ChatDeps]) -> str:
    deps = ctx.deps
    return chat_context(
        now=deps.now,
        timezone=deps.timezone,
        language=deps.turn.chat.language,
        profile=deps.turn.chat.profile,
        summary=deps.summary,
        chat_title=deps.turn.chat.title,
        user_name=deps.turn.incoming.user_display_name,
    )


def build_chat_agent() -> Agent[ChatDeps, str]:
    """The chat agent with its rules, the per-message context and every tool; no model is bound (runs pass it)."""
    return Agent(
        None,
        deps_type=ChatDeps,
        output_type=str,
        instructions=[RULES, _chat_context],
        tools=CHAT_TOOLS,
        retries={"tools": 2, "output": 1},
        name="lookout-chat",
    )


def _model_label(model: Model) -> str:
    prefix = f"{model.system}:"
    return model.model_name if model.model_name.startswith(prefix) else prefix + model.model_name


def _error_reply(what: str) -> list[Reply]:
    error_id = new_error_id()
    logger.exception("chat agent: %s failed (error id %s)", what, error_id)
    return [Reply(text=f"Something went wrong on my side (error id {error_id}). Please try again in a moment.")]


class ChatAgent:
    """Answers free text addressed to the bot and settles pending confirmations (`FreeTextHandler`).

    Built once per process: it holds the agent, the chat model (light, retried, then heavy) and the open
    confirmations. Use it under the dispatcher's per-conversation lock (memory is read, then written).
    """

    def __init__(
        self,
        services: Services,
        *,
        retry_policy: RetryPolicy | None = None,
        confirmation_ttl: timedelta = DEFAULT_CONFIRMATION_TTL,
    ) -> None:
        self._services = services
        self._agent = build_chat_agent()
        self._model = chat_model(services.light_model, services.heavy_model, policy=retry_policy)
        self._budget = ChatBudget(database=services.database, daily_tokens=services.settings.chat_daily_tokens)
        self._confirmations = ConfirmationBook(clock=services.clock, ttl=confirmation_ttl)
        self._told_no_model: set[tuple[int, str]] = set()

    @property
    def confirmations(self) -> ConfirmationBook:
        """The open confirmations (one per conversation at most)."""
        return self._confirmations

    # ---- confirmations ------------------------------------------------------------------------------------

    async def settle_confirmation(self, turn: Turn) -> list[Reply] | None:
        """The answer to a confirmation button or a "yes"/"no"; None when the message is not one."""
        try:
            return await self._settle(turn)
        except Exception:
            return _error_reply("settling a confirmation")

    async def _settle(self, turn: Turn) -> list[Reply] | None:
        data = turn.incoming.callback_data
        if data is not None:
            if data.startswith(CONFIRM_PREFIX):
                token, confirm = data.removeprefix(CONFIRM_PREFIX), True
            elif data.startswith(CANCEL_PREFIX):
                token, confirm = data.removeprefix(CANCEL_PREFIX), False
            else:
                return None  # another component's button
            pending = self._confirmations.get(token)
            if pending is None or pending.chat_id != turn.chat.id:
                return [Reply(text=EXPIRED_MESSAGE)]
            if pending.user_id != turn.user.id and not turn.is_admin:
                return [Reply(text=NOT_YOURS_MESSAGE)]
        else:
            answer = answer_of(turn.incoming.text)
            if answer is None:
                return None
            pending = self._confirmations.for_conversation(turn.chat.id, turn.incoming.thread_key)
            if pending is None or pending.user_id != turn.user.id:
                return None  # a plain "yes" with nothing open (or from someone else) is ordinary text
            confirm = answer == "yes"
        if self._confirmations.close(pending.token) is None:
            return [Reply(text=EXPIRED_MESSAGE)]
        text = await execute_actions(pending, self._services.monitors) if confirm else CANCELLED_MESSAGE
        said = turn.incoming.text.strip() or ("yes" if confirm else "no")
        await self._remember_exchange(pending, said, text)
        return [Reply(text=text)]

    async def _remember_exchange(self, pending: PendingConfirmation, said: str, answered: str) -> None:
        """Put the confirmation into the conversation's memory, so the model knows later what was done."""
        exchange: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart(content=said)]),
            ModelResponse(parts=[TextPart(content=answered)]),
        ]
        memory = conversation_memory(self._services, chat_id=pending.chat_id, thread_key=pending.thread_key)
        try:
            await memory.load()
            await memory.append(exchange)
        except Exception:
            logger.exception("could not store the confirmation exchange for chat %d", pending.chat_id)

    # ---- free text ----------------------------------------------------------------------------------------

    async def reply(self, turn: Turn) -> list[Reply]:
        """The answer to one free-text message."""
        try:
            return await self._reply(turn)
        except Exception:
            return _error_reply("answering free text")

    def _no_model(self, turn: Turn) -> list[Reply]:
        key = (turn.chat.id, turn.incoming.thread_key)
        if key in self._told_no_model:
            return [Reply(text=NO_MODEL_REMINDER)]
        self._told_no_model.add(key)
        reason = self._services.settings.llm_unavailable_reason or "no language model is configured"
        return [
            Reply(
                text=(
                    f"I can't answer free text yet: {reason}, and restart Lookout.\n\n"
                    "Commands work without a model: /track <topic> [schedule], /monitors, /search <query>, "
                    "/collect <request>, /digest <id>, /help."
                )
            )
        ]

    async def _reply(self, turn: Turn) -> list[Reply]:
        model = self._model
        if model is None:
            return self._no_model(turn)
        services = self._services
        now = services.clock()
        remaining = await self._budget.remaining(turn.chat.id, now)
        if remaining is not None and remaining <= 0:
            return [Reply(text=self._budget.spent_message())]
        memory = memory_for(services, turn)
        window = await memory.load()
        deps = ChatDeps(services=services, turn=turn, timezone=chat_timezone(turn, services), summary=window.summary)
        token_limit = services.settings.token_limit
        limits = UsageLimits(
            request_limit=services.settings.request_limit,
            total_tokens_limit=min(token_limit, remaining) if remaining is not None else token_limit,
        )
        prompt = turn.incoming.text.strip()
        if len(prompt) > MAX_PROMPT_CHARS:
            prompt = prompt[:MAX_PROMPT_CHARS] + "\n[message cut: too long]"
        usage = RunUsage()
        try:
            result = await self._agent.run(
                prompt, model=model, deps=deps, message_history=window.messages, usage_limits=limits, usage=usage
            )
        except UsageLimitExceeded:
            await self._record(turn, usage, cost=self._estimated_cost(usage))
            budget_bound = remaining is not None and remaining < token_limit
            text = self._budget.spent_message() if budget_bound else TOO_LONG_MESSAGE
            return [Reply(text=text, attachments=tuple(deps.attachments))]
        except Exception as error:
            await self._record(turn, usage, cost=self._estimated_cost(usage))
            if is_model_failure(error):
                logger.warning("chat model failed for chat %d: %s", turn.chat.id, error)
                return [Reply(text=failure_message(error), attachments=tuple(deps.attachments))]
            if isinstance(error, UnexpectedModelBehavior):
                logger.warning("chat model misbehaved for chat %d: %s", turn.chat.id, error)
                return [Reply(text=BAD_MODEL_ANSWER, attachments=tuple(deps.attachments))]
            raise
        new_messages = result.new_messages()
        await self._record(turn, usage, cost=run_cost_usd(new_messages))
        await memory.append(new_messages)
        reply = self._compose(turn, deps, result.output)
        await self._fold_old_turns(turn, memory, model)
        return [reply]

    def _compose(self, turn: Turn, deps: ChatDeps, output: str) -> Reply:
        text = output.strip() or "Done."
        buttons: tuple[Button, ...] = ()
        if deps.proposals:
            pending: PendingConfirmation = self._confirmations.open(
                chat_id=turn.chat.id,
                thread_key=turn.incoming.thread_key,
                user_id=turn.user.id,
                is_admin=turn.is_admin,
                actions=deps.proposals,
                after_untrusted_text=deps.read_untrusted,
            )
            minutes = max(1, int(self._confirmations.ttl.total_seconds() // 60))
            text = f"{text}\n\n{pending.prompt(minutes=minutes)}"
            buttons = pending.buttons
        return Reply(text=text, attachments=tuple(deps.attachments), buttons=buttons)

    async def _fold_old_turns(self, turn: Turn, memory: ConversationMemory, model: Model) -> None:
        """Summarise the turns leaving the window; on failure the conversation goes on (they stay until next time,
        or, for an idle conversation, are dropped)."""
        if not memory.needs_summary():
            return
        try:
            summary = await summarise(memory.summary, memory.turns_to_summarise(), model=model)
        except Exception as error:
            logger.warning("conversation summary for chat %d failed: %s", turn.chat.id, error)
            return
        await self._record(turn, summary.usage, cost=run_cost_usd(summary.messages))
        if summary.text:
            await memory.apply_summary(summary.text)

    def _estimated_cost(self, usage: RunUsage) -> float:
        light = self._services.light_model
        if light is None:
            return 0.0
        cost = estimate_cost_usd(
            _model_label(light), input_tokens=usage.input_tokens, output_tokens=usage.output_tokens
        )
        return cost or 0.0

    async def _record(self, turn: Turn, usage: RunUsage, *, cost: float) -> None:
        await self._budget.record(turn.chat.id, self._services.clock(), usage, cost=cost)
