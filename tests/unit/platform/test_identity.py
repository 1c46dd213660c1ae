"""The operator's tokens: RS256/ES256 verified against a JWKS (file or URL), `iss` and `aud` checked,
keys rotated by `kid` (an unknown kid reloads the set once, no more often than the cooldown), and
no other algorithm accepted — no `none`, no HS256 signed with a public key."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import grpc
import jwt
import pytest

from croupier_platform.auth import (
    SERVICE_URI_PREFIX,
    JwksFile,
    OperatorKeys,
    TokenAuthority,
    VERIFIED_TOKEN_TTL_S,
    Tokens,
    jwks_source,
    service_of_peer,
)
from croupier.v1 import wallet_pb2
from croupier_platform.errors import Unauthenticated, refusal_for
from croupier_platform.grpc_server import AuthInterceptor, call_metadata, listen
from tests.unit.platform.test_tls import who_am_i
from tests.pki import IdentityProvider, SigningKey
from tests.refusals import refusal_of

NOW = 1_700_000_000
DEV_SECRET = b"identity-tests-dev-secret-0123456789abcdef"


@pytest.fixture(scope="module")
def provider() -> IdentityProvider:
    """Mid-rotation: the old RSA key and the new EC key both published."""
    return IdentityProvider(keys=[SigningKey("2026-old", "RS256"), SigningKey("2026-new", "ES256")])


@pytest.fixture
def keys(provider: IdentityProvider, tmp_path: Path) -> OperatorKeys:
    jwks = provider.write_jwks(tmp_path / "jwks.json")
    return OperatorKeys(jwks_source(str(jwks)), provider.issuer, provider.audience)


def b64(data: str | bytes) -> str:
    return base64.urlsafe_b64encode(data.encode() if isinstance(data, str) else data).rstrip(b"=").decode()


def refusal(verifier, token: str) -> str:  # noqa: ANN001
    """The refusal's message; its ErrorInfo reason is one of the token reasons (expired: TOKEN_EXPIRED)."""
    with pytest.raises(Unauthenticated) as refused:
        verifier.verify(token, NOW)
    mapped = refusal_for(refused.value)
    assert mapped is not None and mapped.reason in ("TOKEN_INVALID", "TOKEN_EXPIRED"), mapped
    assert (mapped.reason == "TOKEN_EXPIRED") == ("expired" in str(refused.value)), mapped
    return str(refused.value)


def test_a_jwks_of_two_keys_accepts_tokens_signed_by_either(provider: IdentityProvider, keys: OperatorKeys) -> None:
    old, new = provider.keys
    alice = keys.verify(provider.mint("alice", "player", NOW, 600, key=old), NOW)
    boss = keys.verify(provider.mint("pit-boss", "operator", NOW, 600, key=new), NOW)
    assert (alice.subject, alice.role) == ("alice", "player")
    assert (boss.subject, boss.role) == ("pit-boss", "operator")


def test_a_token_for_another_audience_is_refused(provider: IdentityProvider, keys: OperatorKeys) -> None:
    assert "audience" in refusal(keys, provider.mint("alice", "player", NOW, 600, aud="another-casino")).lower()


def test_a_token_from_another_issuer_is_refused(provider: IdentityProvider, keys: OperatorKeys) -> None:
    assert "issuer" in refusal(keys, provider.mint("alice", "player", NOW, 600, iss="https://evil.example")).lower()


def test_an_expired_token_is_refused_by_the_clock_passed_in(provider: IdentityProvider, keys: OperatorKeys) -> None:
    token = provider.mint("alice", "player", NOW - 700, 600)
    assert "expired" in refusal(keys, token)
    assert keys.verify(token, NOW - 200).subject == "alice"  # valid at the time it is checked for


def test_a_fractional_expiry_is_a_time_and_a_text_one_is_not(provider: IdentityProvider, keys: OperatorKeys) -> None:
    assert keys.verify(provider.mint("alice", "player", NOW, 600, exp=NOW + 0.5), NOW).subject == "alice"
    assert "exp is not a time" in refusal(keys, provider.mint("alice", "player", NOW, 600, exp="tomorrow"))


def test_a_token_not_valid_yet_is_refused(provider: IdentityProvider, keys: OperatorKeys) -> None:
    assert "not valid yet" in refusal(keys, provider.mint("alice", "player", NOW, 600, nbf=NOW + 60))


def test_a_token_signed_by_a_key_not_in_the_set_is_refused(provider: IdentityProvider, keys: OperatorKeys) -> None:
    stranger = SigningKey("2026-new", "ES256")  # a kid the set has, but another key behind it
    assert "signature" in refusal(keys, provider.mint("alice", "player", NOW, 600, key=stranger)).lower()
    unknown = SigningKey("not-published", "RS256")
    assert "not-published" in refusal(keys, provider.mint("alice", "player", NOW, 600, key=unknown))


def test_alg_none_is_refused(provider: IdentityProvider, keys: OperatorKeys) -> None:
    claims = {"sub": "alice", "role": "operator", "iss": provider.issuer, "aud": provider.audience, "exp": NOW + 600}
    unsigned = f"{b64(json.dumps({'alg': 'none', 'typ': 'JWT', 'kid': '2026-old'}))}.{b64(json.dumps(claims))}."
    assert refusal(keys, unsigned)
    assert "'none'" in refusal(Tokens(operator=keys, dev=TokenAuthority(DEV_SECRET)), unsigned)


def test_hs256_signed_with_the_public_key_is_refused(provider: IdentityProvider, keys: OperatorKeys) -> None:
    """The classic confusion: the RSA public key (which anyone has) used as an HMAC secret."""
    claims = {"sub": "mallory", "role": "operator", "iss": provider.issuer, "aud": provider.audience, "exp": NOW + 600}
    signing_input = f"{b64(json.dumps({'alg': 'HS256', 'typ': 'JWT', 'kid': '2026-old'}))}.{b64(json.dumps(claims))}"
    mac = hmac.new(provider.keys[0].public_pem(), signing_input.encode(), hashlib.sha256).digest()  # PyJWT refuses to forge it
    forged = f"{signing_input}.{b64(mac)}"
    assert "alg value is not allowed" in refusal(keys, forged)
    assert "'HS256' are not accepted" in refusal(Tokens(operator=keys), forged)


def test_the_dev_secret_is_accepted_only_where_it_is_configured(provider: IdentityProvider, keys: OperatorKeys) -> None:
    dev = TokenAuthority(DEV_SECRET)
    dev_token = dev.mint("alice", "service", NOW, 600)
    assert Tokens(operator=keys, dev=dev).verify(dev_token, NOW).role == "service"
    assert "not accepted" in refusal(Tokens(operator=keys), dev_token)
    assert "not accepted" in refusal(Tokens(dev=dev), provider.mint("alice", "player", NOW, 600))


def test_a_verified_token_is_remembered_until_its_exp_or_the_ttl_and_a_refused_one_never() -> None:
    dev = TokenAuthority(DEV_SECRET)
    checks: list[str] = []
    checked = dev.verify
    dev.verify = lambda token, now: checks.append(token) or checked(token, now)  # type: ignore[method-assign]
    tokens = Tokens(dev=dev)
    short, long = dev.mint("alice", "player", NOW, 30), dev.mint("bob", "player", NOW, 3600)
    for _ in range(3):
        assert tokens.verify(short, NOW).subject == "alice" and tokens.verify(long, NOW).subject == "bob"
    assert checks == [short, long], "checked once each, then remembered"
    with pytest.raises(Unauthenticated, match="expired"):
        tokens.verify(short, NOW + 31)  # past its exp: checked again, and refused
    assert tokens.verify(long, NOW + VERIFIED_TOKEN_TTL_S).subject == "bob" and checks[-1] == short
    assert tokens.verify(long, NOW + VERIFIED_TOKEN_TTL_S + 1).subject == "bob" and checks[-1] == long, "past the TTL: checked again"
    forged = long[:-4] + ("AAAA" if not long.endswith("AAAA") else "BBBB")
    for _ in range(2):
        with pytest.raises(Unauthenticated):
            tokens.verify(forged, NOW)
    assert checks[-2:] == [forged, forged], "a refused token is checked every time"


def test_a_remembered_operator_token_is_verified_without_a_thread_hop(provider: IdentityProvider, keys: OperatorKeys) -> None:
    """The server verifies off its event loop only what may fetch the JWKS: a token it took at its word
    a moment ago is answered from memory, on the loop, call after call."""
    tokens = Tokens(operator=keys, dev=TokenAuthority(DEV_SECRET))
    token = provider.mint("alice", "player", NOW, 600)
    assert tokens.may_fetch_keys(token, NOW), "never seen: its kid may need the JWKS"
    tokens.verify(token, NOW)
    assert not tokens.may_fetch_keys(token, NOW + VERIFIED_TOKEN_TTL_S), "remembered: no I/O"
    assert tokens.may_fetch_keys(token, NOW + VERIFIED_TOKEN_TTL_S + 1), "past the TTL: checked afresh"
    assert not tokens.may_fetch_keys(TokenAuthority(DEV_SECRET).mint("game", "service", NOW, 600), NOW), "the dev secret: no I/O"


def test_the_operators_tokens_carry_player_or_operator_never_service(provider: IdentityProvider, keys: OperatorKeys) -> None:
    assert "'service'" in refusal(keys, provider.mint("game", "service", NOW, 600))
    no_role = provider.sign({"sub": "bob", "iss": provider.issuer, "aud": provider.audience, "exp": NOW + 600})
    assert keys.verify(no_role, NOW).role == "player"


def test_a_custom_role_claim_is_read(provider: IdentityProvider, tmp_path: Path) -> None:
    keys = OperatorKeys(jwks_source(str(provider.write_jwks(tmp_path / "jwks.json"))), provider.issuer, provider.audience,
                        role_claim="https://casino.example/role")
    token = provider.sign({"sub": "eve", "iss": provider.issuer, "aud": provider.audience, "exp": NOW + 600,
                           "https://casino.example/role": "operator"})
    assert keys.verify(token, NOW).role == "operator"


def test_a_token_without_kid_or_without_exp_is_refused(provider: IdentityProvider, keys: OperatorKeys) -> None:
    key = provider.keys[0]
    no_kid = jwt.encode({"sub": "a", "iss": provider.issuer, "aud": provider.audience, "exp": NOW + 60}, key.key, algorithm="RS256")
    assert "kid" in refusal(keys, no_kid)
    assert "exp" in refusal(keys, provider.sign({"sub": "a", "iss": provider.issuer, "aud": provider.audience}))


def test_no_verifier_at_all_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="no way to verify tokens"):
        Tokens()


# ------------------------------------------------------------------ rotation by kid


def test_a_rotated_jwks_file_is_reread_for_a_new_kid(tmp_path: Path) -> None:
    provider = IdentityProvider()
    path = provider.write_jwks(tmp_path / "jwks.json")
    keys = OperatorKeys(JwksFile(path, cooldown_s=0), provider.issuer, provider.audience)
    provider.rotate(SigningKey("key-2", "ES256"))
    provider.write_jwks(path)  # the mounted Secret updated
    assert keys.verify(provider.mint("alice", "player", NOW, 600), NOW).subject == "alice"


def test_a_jwks_file_that_cannot_be_reread_refuses_the_new_kid_and_keeps_the_old_keys(tmp_path: Path) -> None:
    provider = IdentityProvider()
    path = provider.write_jwks(tmp_path / "jwks.json")
    keys = OperatorKeys(JwksFile(path, cooldown_s=0), provider.issuer, provider.audience)
    old = provider.mint("alice", "player", NOW, 600)
    provider.rotate(SigningKey("key-2", "ES256"))
    path.write_text('{"keys": [')  # caught mid-write
    assert "cannot reread" in refusal(keys, provider.mint("bob", "player", NOW, 600))
    assert keys.verify(old, NOW).subject == "alice"


def test_a_jwks_file_is_not_reread_within_the_cooldown(tmp_path: Path) -> None:
    provider = IdentityProvider()
    path = provider.write_jwks(tmp_path / "jwks.json")
    keys = OperatorKeys(JwksFile(path, cooldown_s=3600), provider.issuer, provider.audience)
    provider.rotate(SigningKey("key-2", "ES256"))
    provider.write_jwks(path)
    assert "key-2" in refusal(keys, provider.mint("alice", "player", NOW, 600))


class JwksEndpoint:
    """The identity provider's JWKS over HTTP on 127.0.0.1, counting the fetches."""

    def __init__(self, provider: IdentityProvider) -> None:
        self.provider, self.fetches = provider, 0
        # Cleared: a fetch after the first waits until it is set (an identity provider that hangs).
        self.answering, self.asked = threading.Event(), threading.Event()
        self.answering.set()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                endpoint.fetches += 1
                endpoint.asked.set()
                endpoint.answering.wait(30)
                body = json.dumps(endpoint.provider.jwks()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/.well-known/jwks.json"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint() -> Iterator[JwksEndpoint]:
    served = JwksEndpoint(IdentityProvider())
    yield served
    served.close()


def test_an_unknown_kid_refetches_the_url_once_then_accepts_the_rotated_key(endpoint: JwksEndpoint) -> None:
    provider = endpoint.provider
    keys = OperatorKeys(jwks_source(endpoint.url, cooldown_s=0), provider.issuer, provider.audience)
    assert endpoint.fetches == 1  # read at startup
    first = provider.mint("alice", "player", NOW, 600)
    assert keys.verify(first, NOW).subject == "alice"
    assert endpoint.fetches == 1  # from the cache

    provider.rotate(SigningKey("key-2", "ES256"))
    assert keys.verify(provider.mint("bob", "player", NOW, 600), NOW).subject == "bob"
    assert endpoint.fetches == 2  # one refresh for the new kid
    assert keys.verify(first, NOW).subject == "alice"  # the old key still published, still good

    made_up = provider.mint("mallory", "operator", NOW, 600, key=SigningKey("made-up", "RS256"))
    assert "made-up" in refusal(keys, made_up)
    assert endpoint.fetches == 3  # one refresh, then UNAUTHENTICATED


def test_unknown_kids_within_the_cooldown_fetch_nothing(endpoint: JwksEndpoint) -> None:
    """A flood of made-up kids cannot turn into a flood of requests to the identity provider."""
    provider = endpoint.provider
    keys = OperatorKeys(jwks_source(endpoint.url, cooldown_s=3600), provider.issuer, provider.audience)
    for n in range(5):
        refusal(keys, provider.mint("mallory", "operator", NOW, 600, key=SigningKey(f"made-up-{n}", "ES256")))
    assert endpoint.fetches == 1


def test_a_hanging_identity_provider_does_not_stall_the_servers_other_calls(endpoint: JwksEndpoint) -> None:
    """A token with a new kid waits for the JWKS on a thread: meanwhile the event loop serves others."""
    provider = endpoint.provider
    dev = TokenAuthority(DEV_SECRET)
    tokens = Tokens(operator=OperatorKeys(jwks_source(endpoint.url, cooldown_s=0), provider.issuer, provider.audience), dev=dev)
    unknown_kid = provider.mint("mallory", "player", NOW, 600, key=SigningKey("made-up", "ES256"))

    async def scenario() -> tuple[str, grpc.StatusCode]:
        server = grpc.aio.server(interceptors=[AuthInterceptor(tokens, clock=lambda: NOW)])
        handler = grpc.unary_unary_rpc_method_handler(
            who_am_i, request_deserializer=wallet_pb2.GetBalancesRequest.FromString,
            response_serializer=wallet_pb2.GetBalancesResponse.SerializeToString)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Edge", {"WhoAmI": handler}),))
        port = listen(server, "127.0.0.1:0")
        await server.start()
        endpoint.answering.clear()
        endpoint.asked.clear()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                method = channel.unary_unary("/test.Edge/WhoAmI", request_serializer=wallet_pb2.GetBalancesRequest.SerializeToString,
                                             response_deserializer=wallet_pb2.GetBalancesResponse.FromString)
                waiting = asyncio.ensure_future(method(wallet_pb2.GetBalancesRequest(), metadata=call_metadata(unknown_kid), timeout=60))
                assert await asyncio.to_thread(endpoint.asked.wait, 30), "the new kid made the server ask for the JWKS"
                other = await method(wallet_pb2.GetBalancesRequest(), metadata=call_metadata(dev.mint("alice", "player", NOW, 600)), timeout=30)
                assert not waiting.done()  # still waiting for the identity provider
                endpoint.answering.set()
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await waiting
                return other.balances[0].currency, refused.value.code(), refusal_of(refused.value).reason
        finally:
            endpoint.answering.set()
            await server.stop(None)

    assert asyncio.run(scenario()) == ("alice/player", grpc.StatusCode.UNAUTHENTICATED, "TOKEN_INVALID")


def test_an_unreachable_jwks_url_fails_at_startup() -> None:
    with pytest.raises(jwt.PyJWKClientConnectionError):
        jwks_source("http://127.0.0.1:9/jwks.json")


# ------------------------------------------------------------------ services by certificate


def test_a_verified_certificate_naming_a_service_is_that_service() -> None:
    context = {"x509_subject_alternative_name": [b"localhost", f"{SERVICE_URI_PREFIX}wallet".encode()]}
    identity = service_of_peer(context)
    assert identity is not None and (identity.subject, identity.role) == ("wallet", "service")


def test_a_certificate_naming_no_service_names_nobody() -> None:
    assert service_of_peer({"x509_subject_alternative_name": [b"localhost", b"spiffe://other/service/game"]}) is None
    assert service_of_peer({"x509_subject_alternative_name": [SERVICE_URI_PREFIX.encode()]}) is None
    assert service_of_peer({}) is None
