"""The free-text chat agent: answers messages with a pydantic-ai agent (memory, tools, budgets, model fallback)
and settles the confirmations its monitor proposals open."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from functools import partial

from pydantic_ai import Agent, RunContext, RunUsage, UsageLimits, capture_run_messages
from pydantic_ai.capabilities import PrepareTools
from pydantic_ai.exceptions import RunTimedOut, UnexpectedModelBehavior, UsageLimitExceeded
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from agent.chat.deps import ChatDeps
from agent.chat.guards import PromptBudget, ToolCallCap, request_tokens
from agent.chat.instructions import RULES, chat_context
from agent.chat.llm import NO_TIME_MESSAGE, failure_message, is_model_failure, unusable_message
from agent.chat.summary import summarise
from agent.chat.tool_choice import offered_tools, prepare_offered_tools
from agent.chat.tools import CHAT_TOOLS
from agent.commands.catalogue import run_stored
from agent.confirmations import (
    CANCEL_PREFIX,
    CONFIRM_PREFIX,
    DEFAULT_CONFIRMATION_TTL,
    CatalogueAction,
    PendingConfirmation,
    answer_of,
    execute_actions,
)
from agent.context import Services, Turn, chat_timezone
from agent.memory import ConversationMemory, Fold, HistoryCache, encode_messages, trim_to_tokens
from kernel import Reply, apology, new_error_id
from monitors import ChatBudget
from research import LlmUsage, ModelLimits, estimate_tokens, stage_settings, unusable_answer
from storage import ConversationChanges, ConversationRecord, TurnState

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


async def _instructions(ctx: RunContext[ChatDeps]) -> str:
    # One instruction, so one system message per request: chat templates such as Gemma 3's refuse a second one.
    # async on purpose: pydantic-ai runs a plain function's instructions in a worker thread, a hop per turn
    return f"{RULES}\n\n{chat_context(ctx.deps)}"


def build_chat_agent(limits: ModelLimits | None = None) -> Agent[ChatDeps, str]:
    """The chat agent with its rules and the per-message context (one system message), every tool (narrowed per run
    to `ChatDeps.offered_tools` when set), and the guards that hold it to `limits` (tool calls per response and
    turn, the prompt within the context budget); no model is bound (runs pass it)."""
    limits = limits or ModelLimits()
    return Agent(
        None,
        deps_type=ChatDeps,
        output_type=str,
        instructions=_instructions,
        tools=CHAT_TOOLS,
        retries={"tools": 2, "output": 1},
        capabilities=[
            ToolCallCap(per_response=limits.max_tool_calls_per_response, per_turn=limits.max_tool_calls_per_turn),
            PromptBudget(limits),
            PrepareTools(prepare_offered_tools),
        ],
        name="lookout-chat",
    )


CONTEXT_LINES_TOKENS = 600
"""Room kept for the per-chat context lines (time, language, profile up to 2000 characters, summary) when the
history is trimmed before a run."""


def _error_reply(what: str) -> list[Reply]:
    error_id = new_error_id()
    logger.exception("chat agent: %s failed [error id %s]", what, error_id)
    return [Reply(text=apology(error_id))]


class ChatAgent:
    """Answers free text addressed to the bot and settles pending confirmations (`FreeTextHandler`).

    Built once per process: it holds the agent and the process's chat model (`services.models.light`: light,
    retried, then heavy). Use it under the dispatcher's per-conversation lock. Per free-text turn it reads nothing
    itself when the dispatcher read the turn's state, and writes once (memory, an opened confirmation and the
    turn's usage together); a memory fold is left in `turn.after_reply`.
    """

    def __init__(self, services: Services, *, confirmation_ttl: timedelta = DEFAULT_CONFIRMATION_TTL) -> None:
        self._services = services
        self._limits = services.models.limits
        self._agent = build_chat_agent(self._limits)
        self._model = services.models.light
        self._fixed_tokens = request_tokens([], [tool.tool_def for tool in CHAT_TOOLS]) + estimate_tokens(RULES)
        """What every chat request costs before any history: the tool schemas and the rules."""
        self._by_message = self._limits.offers_tools_by_message()
        self._budget = ChatBudget(usage=services.chats.usage, daily_tokens=services.settings.chat_daily_tokens)
        self._turns = services.chats.turns
        self._conversations = services.chats.conversations
        self._confirmation_ttl = confirmation_ttl
        self._histories = HistoryCache()
        """What this process wrote last per conversation, decoded: the next turn reuses it instead of decoding."""

    async def _state(self, turn: Turn) -> TurnState:
        if turn.state is not None:
            return turn.state
        return await self._turns.state(turn.chat.id, turn.incoming.thread_key, _day(self._services.clock()))

    def _memory(self, record: ConversationRecord | None, now: datetime) -> ConversationMemory:
        settings = self._services.settings
        return ConversationMemory(
            record,
            now=now,
            max_turns=settings.memory_turns,
            idle_hours=settings.memory_idle_hours,
            decoded=self._histories,
        )

    # ---- confirmations ------------------------------------------------------------------------------------

    async def settle_confirmation(self, turn: Turn) -> list[Reply] | None:
        """The answer to a confirmation button or a "yes"/"no"; None when the message is not one."""
        try:
            return await self._settle(turn)
        except Exception:
            return _error_reply("settling a confirmation")

    async def _settle(self, turn: Turn) -> list[Reply] | None:
        now = self._services.clock()
        data = turn.incoming.callback_data
        if data is not None:
            if data.startswith(CONFIRM_PREFIX):
                token, confirm = data.removeprefix(CONFIRM_PREFIX), True
            elif data.startswith(CANCEL_PREFIX):
                token, confirm = data.removeprefix(CANCEL_PREFIX), False
            else:
                return None  # another component's button
            record = (await self._state(turn)).conversation
            if record is None or record.confirmation_token != token:
                # pressed in another thread of this chat than the one it was proposed in
                record = await self._conversations.find_confirmation(turn.chat.id, token)
            pending = PendingConfirmation.stored(record, now=now)
            if record is None or pending is None or pending.chat_id != turn.chat.id:
                return [Reply(text=EXPIRED_MESSAGE)]
            if pending.user_id != turn.user.id and not turn.is_admin:
                return [Reply(text=NOT_YOURS_MESSAGE)]
        else:
            answer = answer_of(turn.incoming.text)
            if answer is None:
                return None
            record = (await self._state(turn)).conversation
            pending = PendingConfirmation.stored(record, now=now)
            if record is None or pending is None or pending.user_id != turn.user.id:
                return None  # a plain "yes" with nothing open (or from someone else) is ordinary text
            confirm = answer == "yes"
        if not await self._conversations.claim_confirmation(pending.chat_id, pending.thread_key, pending.token):
            return [Reply(text=EXPIRED_MESSAGE)]  # answered a moment ago (a second press, another process)
        if confirm or pending.declined:
            # carried out for the person who proposed it (an admin's proposal keeps its reach)
            proposer = replace(turn, is_admin=pending.is_admin)

            async def run_action(action: CatalogueAction) -> str:
                return await run_stored(self._services, proposer, action.action, action.arguments)

            text = await execute_actions(pending, self._services.monitors, run_action=run_action, declined=not confirm)
        else:
            text = CANCELLED_MESSAGE
        said = turn.incoming.text.strip() or ("yes" if confirm else "no")
        await self._remember_exchange(record, said, text, now=now)
        return [Reply(text=text)]

    async def _remember_exchange(self, record: ConversationRecord, said: str, answered: str, *, now: datetime) -> None:
        """Put the confirmation into the conversation's memory, so the model knows later what was done."""
        exchange: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart(content=said)]),
            ModelResponse(parts=[TextPart(content=answered)]),
        ]
        stored = self._memory(record, now).encode_after(exchange)
        try:
            await self._conversations.write(
                record.chat_id, record.thread_key, {"messages": stored, "touch": True}, now=now
            )
        except Exception:
            logger.exception("could not store the confirmation exchange for chat %d", record.chat_id)

    # ---- free text ----------------------------------------------------------------------------------------

    async def reply(self, turn: Turn) -> list[Reply]:
        """The answer to one free-text message."""
        try:
            return await self._reply(turn)
        except Exception:
            return _error_reply("answering free text")

    async def _no_model(self, turn: Turn) -> list[Reply]:
        record = (await self._state(turn)).conversation
        if record is not None and record.told_no_model:
            return [Reply(text=NO_MODEL_REMINDER)]
        now = self._services.clock()
        await self._turns.finish(
            turn.chat.id, turn.incoming.thread_key, now=now, day=_day(now), changes={"told_no_model": True}
        )
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

    def _fixed_cost(self, offered: frozenset[str] | None) -> int:
        """What a request costs before any history: the schemas of the tools offered, and the rules."""
        if offered is None:
            return self._fixed_tokens
        return request_tokens([], [tool.tool_def for tool in CHAT_TOOLS if tool.name in offered]) + estimate_tokens(
            RULES
        )

    async def _reply(self, turn: Turn) -> list[Reply]:
        model = self._model
        if model is None:
            return await self._no_model(turn)
        services = self._services
        now = services.clock()
        state = await self._state(turn)
        if self._budget.spent(state.tokens_today):
            return [Reply(text=self._budget.spent_message())]
        remaining = self._budget.left(state.tokens_today)
        memory = self._memory(state.conversation, now)
        window = memory.window()
        prompt = turn.incoming.text.strip()
        if len(prompt) > MAX_PROMPT_CHARS:
            prompt = prompt[:MAX_PROMPT_CHARS] + "\n[message cut: too long]"
        offered = offered_tools(prompt, window.messages) if self._by_message else None
        # the history the prompt budget leaves room for: older turns stay stored and are folded later
        room = self._limits.prompt_tokens("chat") - self._fixed_cost(offered) - CONTEXT_LINES_TOKENS
        room -= estimate_tokens(prompt) + estimate_tokens(window.summary or "")
        history = trim_to_tokens(window.messages, max(0, room))
        deps = ChatDeps(
            services=services,
            turn=turn,
            timezone=chat_timezone(turn, services),
            summary=window.summary,
            offered_tools=offered,
        )
        token_limit = services.settings.token_limit
        limits = UsageLimits(
            request_limit=services.settings.request_limit,
            total_tokens_limit=min(token_limit, remaining) if remaining is not None else token_limit,
        )
        usage = RunUsage()
        with capture_run_messages() as captured:
            try:
                result = await self._agent.run(
                    prompt,
                    model=model,
                    deps=deps,
                    message_history=history,
                    usage_limits=limits,
                    usage=usage,
                    model_settings=stage_settings(model, "chat"),
                    timeout=self._limits.run_seconds,
                )
            except Exception as error:
                # what the failed run spent still counts, priced by the models that answered
                spent = LlmUsage.from_run(usage, model=model, messages=captured[len(history) :])
                await self._finish(turn, now, usage=spent)
                return self._failure(turn, deps, error, budget_bound=remaining is not None and remaining < token_limit)
        new_messages = result.new_messages()
        last = next((m for m in reversed(new_messages) if isinstance(m, ModelResponse)), None)
        # a message said back is degenerate only when nothing was done: after a proposal, "Pause it?" is a question
        acted = any(isinstance(m, ModelResponse) and m.tool_calls for m in new_messages)
        unusable = unusable_answer(
            result.output,
            finish_reason=last.finish_reason if last is not None else None,
            instructions=[RULES],
            language=turn.chat.language,
            asked=None if acted else prompt,
        )
        if unusable is not None:
            # never stored: a cut, looping or wrong-language answer in memory would be read back as if it were said
            logger.warning("chat model's answer for chat %d not used: %s", turn.chat.id, unusable)
            await self._finish(turn, now, usage=LlmUsage.from_run(usage, model=model, messages=new_messages))
            return [Reply(text=unusable_message(unusable), attachments=tuple(deps.attachments))]
        reply, opened = self._compose(turn, deps, result.output, now)
        history = memory.after(new_messages)
        stored = memory.encode_after(new_messages)
        changes: ConversationChanges = {"messages": stored, "touch": True}
        if opened is not None:
            changes["confirmation"] = opened.stored_form()
        spent = LlmUsage.from_run(usage, model=model, messages=new_messages)
        revision = await self._finish(turn, now, usage=spent, changes=changes)
        self._histories.keep(turn.chat.id, turn.incoming.thread_key, stored, history)
        fold = memory.fold(history, revision=revision or 0)
        if fold is not None:
            chat_id, thread_key = turn.chat.id, turn.incoming.thread_key
            turn.after_reply.append(partial(self._fold, fold, chat_id=chat_id, thread_key=thread_key))
        return [reply]

    def _failure(self, turn: Turn, deps: ChatDeps, error: Exception, *, budget_bound: bool) -> list[Reply]:
        attachments = tuple(deps.attachments)
        if isinstance(error, UsageLimitExceeded):
            text = self._budget.spent_message() if budget_bound else TOO_LONG_MESSAGE
            return [Reply(text=text, attachments=attachments)]
        if isinstance(error, RunTimedOut):
            logger.warning("chat run for chat %d passed its deadline of %.0f s", turn.chat.id, self._limits.run_seconds)
            return [Reply(text=NO_TIME_MESSAGE, attachments=attachments)]
        if is_model_failure(error):
            logger.warning("chat model failed for chat %d: %s", turn.chat.id, error)
            return [Reply(text=failure_message(error), attachments=attachments)]
        if isinstance(error, UnexpectedModelBehavior):
            logger.warning("chat model misbehaved for chat %d: %s", turn.chat.id, error)
            return [Reply(text=BAD_MODEL_ANSWER, attachments=attachments)]
        raise error

    async def _finish(
        self, turn: Turn, now: datetime, *, usage: LlmUsage, changes: ConversationChanges | None = None
    ) -> int | None:
        """The turn's one write: the memory (and an opened confirmation) with the usage of the run."""
        return await self._turns.finish(
            turn.chat.id,
            turn.incoming.thread_key,
            now=now,
            day=_day(now),
            changes=changes,
            usage=[usage.entry("chat")],
        )

    def _compose(
        self, turn: Turn, deps: ChatDeps, output: str, now: datetime
    ) -> tuple[Reply, PendingConfirmation | None]:
        text = output.strip() or "Done."
        if not deps.proposals:
            return Reply(text=text, attachments=tuple(deps.attachments)), None
        pending = PendingConfirmation.open(
            turn,
            actions=deps.proposals,
            now=now,
            ttl=self._confirmation_ttl,
            after_untrusted_text=deps.read_untrusted,
        )
        minutes = PendingConfirmation.minutes_open(self._confirmation_ttl)
        text = f"{text}\n\n{pending.prompt(minutes=minutes)}"
        return Reply(text=text, attachments=tuple(deps.attachments), buttons=pending.buttons), pending

    async def _fold(self, fold: Fold, *, chat_id: int, thread_key: str) -> None:
        """Fold old turns into the summary (after the reply went out). A failed summary leaves the memory as it was
        (the turns are folded after a later reply; what an idle expiry set aside is dropped); the call's usage
        counts either way, in the same write."""
        model = self._model
        if model is None:
            return
        summary = await summarise(fold.previous_summary, fold.messages, model=model)
        changes: ConversationChanges | None = None
        if summary.text:
            changes = {"messages": encode_messages(fold.keep), "summary": summary.text}
        now = self._services.clock()
        written = await self._turns.finish(
            chat_id,
            thread_key,
            now=now,
            day=_day(now),
            changes=changes,
            usage=[summary.usage.entry("memory")],
            if_revision=fold.revision,
        )
        if changes is not None and written is None:
            logger.info("conversation %d/%r moved on during its fold; folded again later", chat_id, thread_key)
        elif changes is not None:
            self._histories.keep(chat_id, thread_key, changes["messages"], fold.keep)


def _day(now: datetime) -> date:
    """The (UTC) day usage is counted on."""
    return now.astimezone(UTC).date()
