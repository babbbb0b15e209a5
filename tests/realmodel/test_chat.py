"""`lookout chat` against a real model server, configured as a self-hoster would (`openai-chat:` and
OPENAI_BASE_URL): turns with memory, and a proposal that waits for the person's "yes". Only what must hold with ANY
model is asserted — bounded requests, memory carried and clean, a true line on failure — never the wording."""

from __future__ import annotations

from pathlib import Path

from app.settings import Settings
from tests.realmodel.checks import cut_answers, degenerate_reason, request_problems, response_texts, system_texts
from tests.realmodel.proxy import ModelProxy
from tests.realmodel.world import EMPTY_REASON, chat, memory, monitor_count

TURNS = (
    "Hello! My name is Ada and I follow open-source AI models.",
    "Which topics could you keep an eye on for me?",
    "What is my name?",
)

DEFAULTS = Settings.model_fields
REQUESTS_PER_TURN = int(DEFAULTS["agent_request_limit"].default)
"""AGENT_REQUEST_LIMIT's default: model requests one chat message may cause (the memory fold after it included)."""
TOKENS_PER_TURN = int(DEFAULTS["agent_token_limit"].default)
"""AGENT_TOKEN_LIMIT's default: tokens one chat message may use, input and output together."""


def answered(output: str) -> str:
    """What the chat printed after its two greeting lines."""
    return "\n".join(output.splitlines()[2:])


def test_chat_turns_with_memory_stay_within_budget_and_store_nothing_degenerate(
    model_env: dict[str, str], proxy: ModelProxy
) -> None:
    data_dir = Path(model_env["DATA_DIR"])
    stored_before: list[str] = []
    for number, line in enumerate(TURNS, start=1):
        mark = len(proxy.exchanges)
        result = chat([line])
        turn = proxy.since(mark)
        assert result.exit_code == 0, result.output
        assert "Traceback" not in result.output, result.output
        assert turn, f"turn {number} never reached the model"
        reply = answered(result.output)
        assert reply.strip(), f"turn {number}: nothing was said to the person\n{result.output}"
        assert not EMPTY_REASON.search(reply), f"turn {number}: an error line without its reason: {reply}"

        problems = request_problems(turn)
        assert not problems, f"turn {number}: " + "; ".join(problems)
        assert len(turn) <= REQUESTS_PER_TURN, f"turn {number} made {len(turn)} requests"
        spent = sum(e.prompt_tokens + e.output_tokens for e in turn)
        assert spent <= TOKENS_PER_TURN, f"turn {number} spent {spent} tokens"
        failed = [e for e in turn if e.status != 200]
        if failed:  # a server error is told, never shown as an answer
            assert not all(e.status == 200 for e in turn) and reply.strip()

        # Memory: what was stored before this turn was sent with it, in the turn's first request.
        first_request = " ".join(str(m.get("content") or "") for m in turn[0].messages)
        for prompt in stored_before:
            assert prompt in first_request, f"turn {number} did not carry the stored turn {prompt!r}"
        stored = memory(data_dir)
        stored_before = stored.user_prompts

    # Nothing degenerate in memory: no empty, repeating, prompt-reciting or cut answer was kept.
    stored = memory(data_dir)
    systems, cut = system_texts(proxy.exchanges), cut_answers(proxy.exchanges)
    for text in response_texts(stored.messages):
        reason = degenerate_reason(text, system_texts=systems, cut_answers=cut)
        assert reason is None, f"memory kept an answer that is {reason}: {text[:300]!r}"
    if stored.summary:
        assert degenerate_reason(stored.summary, system_texts=systems) is None, stored.summary[:300]


def test_a_proposal_creates_nothing_until_the_person_says_yes(model_env: dict[str, str], proxy: ModelProxy) -> None:
    data_dir = Path(model_env["DATA_DIR"])
    result = chat(["Please track DeepSeek for me every day at 9:00 from hn."])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    assert proxy.chat_exchanges(), "the free text never reached the model"
    problems = request_problems(proxy.exchanges)
    assert not problems, "; ".join(problems)
    assert monitor_count(data_dir) == 0, "a monitor was created without the person's yes"

    proposal = memory(data_dir).confirmation
    if proposal is None:
        return  # the model proposed nothing; that it created nothing is what must hold
    result = chat(["no"])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    assert monitor_count(data_dir) == 0, "a declined proposal created a monitor"
