"""The HTTP server's bearer tokens (the access_tokens table): only their hashes."""

from __future__ import annotations

from ollama_mcp.domain import AccessToken
from ollama_mcp.storage.sql.parts import SqlParts

_COLUMNS = "name, principal, created_at, revoked_at"


class TokenStore(SqlParts):
    """The HTTP server's bearer tokens (the access_tokens table): only their hashes."""

    async def create_token(self, token: AccessToken, token_hash: str) -> bool:
        """Keep a new token's hash; False (and nothing kept) when an active token has that name."""
        async with self._transaction("create the token") as conn:
            cursor = await conn.execute(
                self._dialect.sql(
                    "INSERT INTO access_tokens (name, principal, token_hash, created_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT DO NOTHING"
                ),
                (token.name, token.principal, token_hash, token.created_at),
            )
            return bool(cursor.rowcount == 1)

    async def token_by_hash(self, token_hash: str) -> AccessToken | None:
        """The active (not revoked) token with this hash."""
        rows = await self._fetchall(
            self._dialect.sql(f"SELECT {_COLUMNS} FROM access_tokens WHERE token_hash = ? AND revoked_at IS NULL"),
            (token_hash,),
            "check the token",
        )
        return AccessToken(*rows[0]) if rows else None

    async def list_tokens(self) -> list[AccessToken]:
        """Every token, active ones first, then by name."""
        rows = await self._fetchall(
            self._dialect.sql(f"SELECT {_COLUMNS} FROM access_tokens ORDER BY revoked_at IS NOT NULL, name, id"),
            (),
            "list the tokens",
        )
        return [AccessToken(*row) for row in rows]

    async def revoke_token(self, name: str, now: str) -> bool:
        """Revoke the active token of this name; False when there is none."""
        async with self._transaction("revoke the token") as conn:
            cursor = await conn.execute(
                self._dialect.sql("UPDATE access_tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL"),
                (now, name),
            )
            return bool(cursor.rowcount == 1)

    async def token_rows(self) -> list[tuple[AccessToken, str]]:
        """Every token with its hash, in the order they were made (``migrate`` copies them)."""
        rows = await self._fetchall(
            self._dialect.sql(f"SELECT {_COLUMNS}, token_hash FROM access_tokens ORDER BY id"), (), "read the tokens"
        )
        return [(AccessToken(*row[:4]), row[4]) for row in rows]

    async def import_tokens(self, rows: list[tuple[AccessToken, str]]) -> None:
        """Keep tokens made elsewhere, hashes as given, in one transaction; a hash already kept is
        left as it is, except that it is revoked when the given row is."""
        async with self._transaction("copy the tokens") as conn:
            for token, token_hash in rows:
                await conn.execute(
                    self._dialect.sql(
                        f"INSERT INTO access_tokens ({_COLUMNS}, token_hash) VALUES (?, ?, ?, ?, ?)"
                        " ON CONFLICT (token_hash) DO UPDATE SET revoked_at = excluded.revoked_at"
                        " WHERE access_tokens.revoked_at IS NULL AND excluded.revoked_at IS NOT NULL"
                    ),
                    (token.name, token.principal, token.created_at, token.revoked_at, token_hash),
                )
