"""Sample markdown: hand-made digests shaped like research.digest's output, and a hypothesis strategy."""

from __future__ import annotations

from hypothesis import strategies as st

_TOPICS = [
    "DeepSeek released R2 weights under an MIT licence & published a 40-page technical report",
    "Benchmarks on <SWE-bench Verified> put the model within 2 points of the leading closed model",
    "Inference providers cut prices for the 'distilled' 32B variant by 60% within a day",
    "Researchers question the contamination checks for the maths benchmarks (AIME, HMMT)",
    "A `vllm` release adds day-one support, with FP8 kernels for H100 and MI300 accelerators",
]


def digest_markdown(developments: int, *, emoji: bool = False) -> str:
    """A digest with `developments` numbered items, a disputed section, a self-check line and the sources."""
    marker = " 🚀" if emoji else ""
    items = []
    for number in range(1, developments + 1):
        topic = _TOPICS[number % len(_TOPICS)]
        items.append(
            f"{number}. **{topic}**{marker}: according to the coverage, this matters because teams evaluating "
            f"open models for production now have another option to compare on cost and quality "
            f"[{number}][{(number % 7) + 1}]"
        )
    disputed = "\n".join(
        f"- Claimed *{n * 3}% faster* decoding than the previous release [{n}] (unverified)" for n in range(1, 4)
    )
    sources = "\n".join(
        f"[{n}] [Source number {n}: coverage & analysis](https://news.example.com/story?id={n}&ref=lookout) — hn"
        for n in range(1, developments + 1)
    )
    return (
        "**DeepSeek this week: R2 lands, prices fall, benchmarks argued over**\n\n"
        + "\n".join(items)
        + "\n\n**Since the last digest:** the licence changed and two providers added the model.\n\n"
        + f"**Disputed or unverified:**\n{disputed}\n\n"
        + "_Self-check: completeness 80%, quality 75%; missing: Chinese-language coverage_\n\n"
        + f"**Sources**\n{sources}\n"
    )


# Markdown built from the pieces that trip renderers up: markers, brackets, HTML, entities, emoji, accents.
_FRAGMENTS = st.sampled_from(
    [
        "**", "*", "_", "__", "~~", "`", "```", "```py\n", "[", "]", "](", ")", "(", "https://x.org/a_b", "[1]",
        "<script>", "</b>", "&", "&amp;", "<", ">", '"', "# ", "## ", "- ", "* ", "1. ", "> ", "---", "\n", "\n\n",
        " ", "  ", "word", "longerword", "😀", "👍🏽", "👨\u200d👩\u200d👧", "中文", "é", "e\u0301", "\\", "|",
    ]
)  # fmt: skip
MARKDOWN = st.lists(st.one_of(_FRAGMENTS, st.text(max_size=8)), max_size=60).map("".join)
