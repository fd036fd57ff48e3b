"""Bearer-token primitives shared by Boundary and the data plane.

Tokens are opaque: ``bst_<kind>_<secret>`` where kind is ``pub`` (publisher), ``usr``
(Boundary user) or ``op`` (operator) and the secret is 32 random bytes in base32 (52
characters). Only the SHA-256 of the whole token is stored; the secret is shown once.
The kind prefix lets a service reject a token of the wrong kind before any lookup and lets
secret scanners recognise leaked tokens.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import re
import secrets

from api.common.errors import Forbidden, Unauthenticated
from formats.boundary_wire import TokenIntrospection
from formats.object_keys import InvalidKeyError, Scope

TOKEN_PREFIX = "bst_"


class TokenKind(enum.StrEnum):
    PUBLISHER = "publisher"
    USER = "user"
    OPERATOR = "operator"


class Permission(enum.StrEnum):
    QUERY = "query"  # call the query coordinator
    ERASURE = "erasure"  # request erasures at the gateway
    ADMIN = "admin"  # manage projects, environments, tokens and config within the token's scope
    PUBLISH = "publish"  # the publisher's two gateway endpoints


KIND_TAG: dict[TokenKind, str] = {TokenKind.PUBLISHER: "pub", TokenKind.USER: "usr", TokenKind.OPERATOR: "op"}
_TAG_KIND = {tag: kind for kind, tag in KIND_TAG.items()}
_SECRET_CHARS = 52
_TOKEN_RE = re.compile(r"^bst_(pub|usr|op)_([a-z2-7]{52})$")

# What each kind may carry; user tokens choose a subset when issued.
ALLOWED_PERMISSIONS: dict[TokenKind, frozenset[Permission]] = {
    TokenKind.PUBLISHER: frozenset({Permission.PUBLISH}),
    TokenKind.USER: frozenset({Permission.QUERY, Permission.ERASURE, Permission.ADMIN}),
    TokenKind.OPERATOR: frozenset({Permission.ADMIN}),
}


def generate_token(kind: TokenKind) -> str:
    secret = base64.b32encode(secrets.token_bytes(32)).decode().rstrip("=").lower()
    assert len(secret) == _SECRET_CHARS
    return f"{TOKEN_PREFIX}{KIND_TAG[kind]}_{secret}"


def hash_token(token: str) -> str:
    """SHA-256 hex of the full token: 256 bits of entropy make a slow hash unnecessary."""
    return hashlib.sha256(token.encode()).hexdigest()


def token_kind(token: str) -> TokenKind | None:
    """The kind a well-formed token claims, or None when the string is not a token."""
    m = _TOKEN_RE.match(token)
    return _TAG_KIND[m.group(1)] if m else None


def token_display_prefix(token: str) -> str:
    """A non-secret handle for listings: the kind tag and the first 4 secret characters."""
    kind = token_kind(token)
    if kind is None:
        return "invalid"
    return token[: len(TOKEN_PREFIX) + len(KIND_TAG[kind]) + 1 + 4]


def constant_time_equal(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def bearer_token(authorization: str | None) -> str:
    """The token from an ``Authorization: Bearer ...`` header, or a 401 naming the problem."""
    if not authorization:
        raise Unauthenticated(
            "missing Authorization header",
            remedy="Send 'Authorization: Bearer <token>'.",
            code="token_missing",
        )
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise Unauthenticated(
            "Authorization header is not a Bearer token",
            remedy="Send 'Authorization: Bearer <token>'.",
            code="token_malformed",
        )
    token = value.strip()
    if token_kind(token) is None:
        raise Unauthenticated(
            "token is not a BAML token (expected bst_pub_, bst_usr_ or bst_op_ followed by 52 characters)",
            remedy="Use a token issued by the Boundary control API.",
            code="token_malformed",
        )
    return token


def user_token_scope(
    info: TokenIntrospection, permission: str, *, refused: str, refused_code: str, remedy: str
) -> tuple[str, Scope]:
    """(token id, scope) of an introspected user token that carries ``permission`` and names one
    environment; 401/403 otherwise. The data plane's user-facing endpoints (queries, erasures)
    differ only in the permission and the wording of the refusal."""
    if not info.active:
        # Unknown, expired, revoked and other tenants' tokens look alike on purpose.
        raise Unauthenticated(
            "token is unknown, expired or revoked",
            code="token_inactive",
            remedy="Sign in again or issue a new user token.",
        )
    if info.kind != TokenKind.USER.value or permission not in info.permissions:
        raise Forbidden(refused, code=refused_code, remedy=remedy)
    if not (info.tenant_id and info.project_id and info.environment_id):
        raise Forbidden(
            "the token is not bound to one environment",
            code="token_without_environment",
            remedy="Issue a user token for the environment you want to work in.",
        )
    try:
        scope = Scope(info.tenant_id, info.project_id, info.environment_id)
    except InvalidKeyError:
        raise Forbidden("the token's scope has no data here", code="scope_invalid") from None
    return info.token_id or "", scope
