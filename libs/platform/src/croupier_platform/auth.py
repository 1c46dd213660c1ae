"""Bearer tokens: signed by the server's secret (HS256), naming the player and a role."""

from __future__ import annotations

import contextvars
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import jwt

from .errors import PermissionDenied, Unauthenticated

Role = Literal["player", "operator", "service"]
ROLES: tuple[str, ...] = ("player", "operator", "service")
ISSUER = "croupier"
ALGORITHM = "HS256"


@dataclass(frozen=True)
class Identity:
    subject: str
    role: Role

    def require_operator(self) -> None:
        if self.role != "operator":
            raise PermissionDenied("this call is for operators only; mint an operator token (croupier token NAME --operator)")

    def require_service(self) -> None:
        # Operators audit through AuditService; internal calls (dealing, shoes, stakes) stay with the services.
        if self.role != "service":
            raise PermissionDenied("this is an internal call for Croupier services only")

    def may_act_for(self, player_id: str) -> bool:
        return self.role in ("operator", "service") or self.subject == player_id


class TokenAuthority:
    """Mints and verifies tokens with one secret; the clock is passed in, never read here."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 32:
            raise ValueError("the token secret must be at least 32 bytes")
        self._secret = secret

    def mint(self, subject: str, role: Role, issued_at: int, lifetime_s: int) -> str:
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; roles are {', '.join(ROLES)}")
        if not subject or len(subject) > 64 or not subject.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise ValueError("a player name is 1-64 letters, digits, '-', '_' or '.'")
        claims = {"sub": subject, "role": role, "iss": ISSUER, "iat": issued_at, "exp": issued_at + lifetime_s}
        return jwt.encode(claims, self._secret, algorithm=ALGORITHM)

    def verify(self, token: str, now: int) -> Identity:
        try:
            claims = jwt.decode(
                token, self._secret, algorithms=[ALGORITHM], issuer=ISSUER,
                options={"require": ["sub", "role", "exp", "iat"], "verify_exp": False},
            )
        except jwt.PyJWTError as exc:
            raise Unauthenticated(f"invalid token ({exc}); send 'authorization: Bearer <token>' minted by this server") from None
        if claims["exp"] < now:
            raise Unauthenticated("the token has expired; mint a new one")
        if claims["role"] not in ROLES:
            raise Unauthenticated(f"the token names an unknown role {claims['role']!r}")
        return Identity(subject=claims["sub"], role=claims["role"])


def load_or_create_secret(path: Path) -> bytes:
    """The server's signing secret, created once (0600) beside its data."""
    if path.exists():
        return bytes.fromhex(path.read_text().strip())
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_bytes(32)
    path.touch(mode=0o600)
    path.write_text(secret.hex())
    return secret


_current: contextvars.ContextVar[Identity | None] = contextvars.ContextVar("croupier_identity", default=None)


def current_identity() -> Identity:
    identity = _current.get()
    if identity is None:
        raise Unauthenticated("missing credentials; send 'authorization: Bearer <token>'")
    return identity


def set_identity(identity: Identity | None) -> contextvars.Token:
    return _current.set(identity)


def reset_identity(token: contextvars.Token) -> None:
    _current.reset(token)
