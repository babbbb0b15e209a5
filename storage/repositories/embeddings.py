"""Embedding vectors by text key: read many at once, add new ones (a key stored before keeps its vector)."""

from __future__ import annotations

import sys
from array import array
from collections.abc import Mapping, Sequence

from sqlalchemy import select

from storage.models import ItemEmbedding
from storage.repositories._common import Repository, upsert_insert

_CHUNK = 500
"""Keys per SELECT ... IN (...): well under SQLite's and asyncpg's parameter limits."""


def _pack(vector: Sequence[float]) -> bytes:
    values = array("f", vector)
    if sys.byteorder != "little":  # stored little-endian, whatever machine wrote them
        values.byteswap()
    return values.tobytes()


def _unpack(data: bytes) -> list[float]:
    values = array("f")
    values.frombytes(data)
    if sys.byteorder != "little":
        values.byteswap()
    return values.tolist()


class EmbeddingRepository(Repository):
    async def get_many(self, keys: Sequence[str]) -> dict[str, list[float]]:
        """The stored vectors for those keys that have one."""
        found: dict[str, list[float]] = {}
        async with self._db.sessions() as session:
            for start in range(0, len(keys), _CHUNK):
                chunk = list(keys[start : start + _CHUNK])
                rows = await session.execute(
                    select(ItemEmbedding.key, ItemEmbedding.vector).where(ItemEmbedding.key.in_(chunk))
                )
                for key, vector in rows:
                    found[key] = _unpack(vector)
        return found

    async def put_many(self, vectors: Mapping[str, Sequence[float]], *, model: str) -> None:
        """Store vectors by key; keys stored before are left as they are (concurrent runs may race to store)."""
        if not vectors:
            return
        async with self._db.transaction() as session:
            rows = [
                {"key": key, "model": model, "dimensions": len(vector), "vector": _pack(vector)}
                for key, vector in vectors.items()
            ]
            for start in range(0, len(rows), _CHUNK):
                statement = upsert_insert(session, ItemEmbedding).values(rows[start : start + _CHUNK])
                await session.execute(statement.on_conflict_do_nothing(index_elements=["key"]))

    async def count(self) -> int:
        """How many vectors are stored."""
        async with self._db.sessions() as session:
            return len((await session.execute(select(ItemEmbedding.key))).all())
