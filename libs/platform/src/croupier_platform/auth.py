"""Who is calling: bearer tokens verified against the operator's keys (RS256/ES256 from a JWKS
file or URL), the dev secret (HS256, the embedded server's and local stacks' only), or, between
services, the service named by a verified client certificate (mTLS)."""

from __future__ import annotations

import contextvars
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

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
            raise PermissionDenied("this call is for operators only; mint an operator token (croupier token NAME --operator)", metadata={"required_role": "operator"})

    def require_service(self) -> None:
        # Operators audit through AuditService; internal calls (dealing, shoes, stakes) stay with the services.
        if self.role != "service":
            raise PermissionDenied("this is an internal call for Croupier services only", metadata={"required_role": "service"})

    def require_player(self, why: str = "this call is for players only") -> None:
        if self.role != "player":
            raise PermissionDenied(why, metadata={"required_role": "player"})

    def may_act_for(self, player_id: str) -> bool:
        return self.role in ("operator", "service") or self.subject == player_id


class TokenVerifier(Protocol):
    def verify(self, token: str, now: int) -> Identity: ...

    def may_fetch_keys(self, token: str, now: int) -> bool:
        """Whether verifying `token` at `now` may wait on I/O (fetching the operator's JWKS): the server
        then verifies it off its event loop."""
        ...


class TokenAuthority:
    """The dev secret: mints and verifies HS256 tokens of every role, services' included. For the
    embedded server (`croupier serve`, `make run`) and local stacks only: whoever holds it can mint
    an operator's or a service's token. The clock is passed in, never read here."""

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

    def may_fetch_keys(self, token: str, now: int) -> bool:
        return False

    def verify(self, token: str, now: int) -> Identity:
        try:
            claims = jwt.decode(
                token, self._secret, algorithms=[ALGORITHM], issuer=ISSUER,
                options={"require": ["sub", "role", "exp", "iat"], "verify_exp": False},
            )
        except jwt.PyJWTError as exc:
            raise Unauthenticated(f"invalid token ({exc}); send 'authorization: Bearer <token>' minted by this server") from None
        if claims["exp"] < now:
            raise Unauthenticated("the token has expired; mint a new one", reason="TOKEN_EXPIRED")
        if claims["role"] not in ROLES:
            raise Unauthenticated(f"the token names an unknown role {claims['role']!r}")
        return Identity(subject=claims["sub"], role=claims["role"])


# Keys the operator's identity provider signs with; a token's header names one of these and its
# key's type must match (no HS256 with a public key as the secret, no "none").
OPERATOR_ALGORITHMS = ("RS256", "ES256")
# Roles the operator's tokens may carry; "service" comes only from a client certificate (or the dev secret).
OPERATOR_TOKEN_ROLES = ("player", "operator")
# A kid not in the set reloads it at most this often: a flood of made-up kids cannot flood the provider.
JWKS_REFRESH_COOLDOWN_S = 30.0
JWKS_FETCH_TIMEOUT_S = 5.0


class JwksFile:
    """A JWKS on disk (e.g. a mounted Secret), reread when a token names a kid it lacks, at most once
    per `cooldown_s`: the file-backed twin of PyJWT's PyJWKClient (which fetches only http(s))."""

    def __init__(self, path: Path, cooldown_s: float = JWKS_REFRESH_COOLDOWN_S) -> None:
        self._path, self._cooldown_s = path, cooldown_s
        self._lock = threading.Lock()
        self._keys = self._load()
        self._loaded_at = time.monotonic()

    def _load(self) -> jwt.PyJWKSet:
        return jwt.PyJWKSet.from_json(self._path.read_text())

    def get_signing_key(self, kid: str) -> jwt.PyJWK:
        with self._lock:
            key = _key_of(self._keys, kid)
            if key is None and time.monotonic() - self._loaded_at >= self._cooldown_s:
                self._loaded_at = time.monotonic()
                try:
                    self._keys = self._load()
                except (OSError, ValueError, jwt.PyJWTError) as exc:  # mid-rewrite or gone: keep the keys we have
                    raise jwt.PyJWKClientError(f"cannot reread {self._path}: {exc}") from None
                key = _key_of(self._keys, kid)
        if key is None:
            raise jwt.PyJWKClientError(f"no key with kid {kid!r} in {self._path}")
        return key


def _key_of(keys: jwt.PyJWKSet, kid: str) -> jwt.PyJWK | None:
    return next((key for key in keys.keys if key.key_id == kid), None)


class KeySource(Protocol):
    def get_signing_key(self, kid: str) -> jwt.PyJWK: ...


def jwks_source(location: str, cooldown_s: float = JWKS_REFRESH_COOLDOWN_S) -> KeySource:
    """The operator's keys from an http(s) URL (PyJWKClient: cached, refreshed once on an unknown
    kid after the cooldown) or a file path; the set is read now, so a bad location fails at startup."""
    if location.startswith(("https://", "http://")):
        client = jwt.PyJWKClient(location, timeout=JWKS_FETCH_TIMEOUT_S, cooldown_duration=cooldown_s)
        client.get_jwk_set()
        return client
    return JwksFile(Path(location), cooldown_s)


class OperatorKeys:
    """Verifies the operator's tokens: RS256/ES256, the key found by the header's kid, `iss` and `aud`
    as configured, `exp` required. The role is the `role_claim` (absent: a player)."""

    def __init__(self, keys: KeySource, issuer: str, audience: str, role_claim: str = "role") -> None:
        self._keys, self._issuer, self._audience, self._role_claim = keys, issuer, audience, role_claim

    def may_fetch_keys(self, token: str, now: int) -> bool:
        return True  # an unknown kid, or a cached set past its lifespan, fetches it

    def verify(self, token: str, now: int) -> Identity:
        try:
            kid = jwt.get_unverified_header(token).get("kid")
            if not isinstance(kid, str) or not kid:
                raise jwt.InvalidTokenError("the token's header names no key (kid)")
            claims = jwt.decode(
                token, self._keys.get_signing_key(kid), algorithms=list(OPERATOR_ALGORITHMS),
                issuer=self._issuer, audience=self._audience,
                options={"require": ["sub", "exp", "iss", "aud"], "verify_exp": False, "verify_nbf": False, "verify_iat": False},
            )
        except jwt.PyJWTError as exc:
            raise Unauthenticated(f"invalid token ({exc}); send 'authorization: Bearer <token>' issued by {self._issuer}") from None
        _check_times(claims, now)
        role = claims.get(self._role_claim, "player")
        if role not in OPERATOR_TOKEN_ROLES:
            raise Unauthenticated(f"the token's {self._role_claim!r} must be one of {', '.join(OPERATOR_TOKEN_ROLES)}, not {role!r}")
        subject = claims["sub"]
        if not isinstance(subject, str) or not 0 < len(subject) <= MAX_SUBJECT_CHARS:
            raise Unauthenticated(f"the token's subject must be 1-{MAX_SUBJECT_CHARS} characters")
        return Identity(subject=subject, role=role)


MAX_SUBJECT_CHARS = 128


def _check_times(claims: Mapping[str, object], now: int) -> None:
    """Against the clock passed in (tests and replays), not the wall clock PyJWT would read."""
    expires, not_before = claims.get("exp"), claims.get("nbf")
    if not _is_time(expires):
        raise Unauthenticated("the token's exp is not a time (seconds since the epoch)")
    if expires < now:  # type: ignore[operator]
        raise Unauthenticated("the token has expired; ask the identity provider for a new one", reason="TOKEN_EXPIRED")
    if not_before is not None and (not _is_time(not_before) or not_before > now):  # type: ignore[operator]
        raise Unauthenticated("the token is not valid yet (nbf)")


def _is_time(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# A token verified once is taken at its word for this long, and never past its exp: the same
# tokens (a player's, the services' own) come with call after call, and a signature check costs
# more than the call's routing. A key withdrawn from the operator's JWKS is honoured within it.
VERIFIED_TOKEN_TTL_S = 60
VERIFIED_TOKENS_MAX = 10_000


class Tokens:
    """Every key this process accepts, chosen by the token's `alg`: HS256 for the dev secret (when
    one is configured), RS256/ES256 for the operator's keys. Nothing else is tried. A token that
    passed is remembered (`VERIFIED_TOKEN_TTL_S`); one that failed is checked afresh every time."""

    def __init__(self, operator: OperatorKeys | None = None, dev: TokenAuthority | None = None) -> None:
        if operator is None and dev is None:
            raise ValueError("no way to verify tokens: configure the operator's JWKS or the dev secret")
        self.operator, self.dev = operator, dev
        self._verified: dict[str, tuple[Identity, int]] = {}  # token -> (its identity, taken until)

    def _algorithm(self, token: str) -> object:
        try:
            return jwt.get_unverified_header(token).get("alg")
        except jwt.PyJWTError as exc:
            raise Unauthenticated(f"invalid token ({exc}); send 'authorization: Bearer <token>'") from None

    def may_fetch_keys(self, token: str, now: int) -> bool:
        if self.operator is None or self._remembered(token, now) is not None:
            return False  # the dev secret, or a token taken at its word: no I/O, no thread
        try:
            return self._algorithm(token) in OPERATOR_ALGORITHMS
        except Unauthenticated:
            return False  # refused without any I/O

    def _remembered(self, token: str, now: int) -> Identity | None:
        known = self._verified.get(token)
        return known[0] if known is not None and now <= known[1] else None

    def verify(self, token: str, now: int) -> Identity:
        if (known := self._remembered(token, now)) is not None:
            return known
        identity = self._verify(token, now)
        good_until = min(int(jwt.decode(token, options={"verify_signature": False})["exp"]), now + VERIFIED_TOKEN_TTL_S)
        if len(self._verified) >= VERIFIED_TOKENS_MAX:
            self._verified.clear()
        self._verified[token] = (identity, good_until)
        return identity

    def _verify(self, token: str, now: int) -> Identity:
        algorithm = self._algorithm(token)
        if algorithm == ALGORITHM and self.dev is not None:
            return self.dev.verify(token, now)
        if algorithm in OPERATOR_ALGORITHMS and self.operator is not None:
            return self.operator.verify(token, now)
        accepted = [*(OPERATOR_ALGORITHMS if self.operator else ()), *((ALGORITHM,) if self.dev else ())]
        raise Unauthenticated(f"tokens signed with {algorithm!r} are not accepted here (accepted: {', '.join(accepted)})")


# A client certificate names a Croupier service by this URI SAN (SPIFFE form): the service role
# without any token. The CA that signs them must sign nothing else that reaches the internal port.
SERVICE_URI_PREFIX = "spiffe://croupier/service/"


def service_of_peer(auth_context: Mapping[str, Sequence[bytes]]) -> Identity | None:
    """The service a verified client certificate names (gRPC's auth context, filled only when the
    server asked for and checked the certificate); None without one or when it names no service."""
    for san in auth_context.get("x509_subject_alternative_name", ()):
        name = san.decode(errors="replace")
        if name.startswith(SERVICE_URI_PREFIX) and (service := name[len(SERVICE_URI_PREFIX):]):
            return Identity(subject=service, role="service")
    return None


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
        raise Unauthenticated("missing credentials; send 'authorization: Bearer <token>'", reason="TOKEN_MISSING")
    return identity


def set_identity(identity: Identity | None) -> contextvars.Token:
    return _current.set(identity)


def reset_identity(token: contextvars.Token) -> None:
    _current.reset(token)
