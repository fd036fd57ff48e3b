"""Who may do what: pure decisions over an authenticated :class:`Principal` and a target scope.

Reads of something outside the caller's tenant answer 404 (as if it did not exist, so ids of
other tenants cannot be probed); a caller inside the tenant without the needed permission
gets 403. A scope in a path or body only selects a target; it is never authority.
"""

from __future__ import annotations

from dataclasses import dataclass

from api.common.auth import ALLOWED_PERMISSIONS, Permission, TokenKind
from api.common.errors import Forbidden, NotFound, Unprocessable


@dataclass(frozen=True)
class Principal:
    token_id: str
    kind: TokenKind
    tenant_id: str | None
    project_id: str | None
    environment_id: str | None
    permissions: frozenset[str]

    @property
    def is_operator(self) -> bool:
        return self.kind is TokenKind.OPERATOR

    def has(self, permission: Permission) -> bool:
        return permission.value in self.permissions


@dataclass(frozen=True)
class Scope:
    tenant_id: str
    project_id: str | None = None
    environment_id: str | None = None


def _contains(p: Principal, target: Scope) -> bool:
    if p.is_operator:
        return True
    if p.tenant_id != target.tenant_id:
        return False
    if p.project_id is not None and p.project_id != target.project_id:
        return False
    return not (p.environment_id is not None and p.environment_id != target.environment_id)


def _overlaps(p: Principal, target: Scope) -> bool:
    """A read may see a parent of the caller's scope (its own tenant and project records)."""
    if p.is_operator:
        return True
    if p.tenant_id != target.tenant_id:
        return False
    if target.project_id is not None and p.project_id not in (None, target.project_id):
        return False
    return not (target.environment_id is not None and p.environment_id not in (None, target.environment_id))


def require_read(p: Principal, target: Scope, what: str, ident: str) -> None:
    if not _overlaps(p, target):
        raise NotFound(f"{what} {ident} not found", code=f"{what}_not_found")


def require_admin(p: Principal, target: Scope, what: str, ident: str) -> None:
    require_read(p, target, what, ident)
    if p.is_operator:
        return
    if not p.has(Permission.ADMIN):
        raise Forbidden(
            "this operation needs the admin permission",
            code="permission_missing",
            remedy="Use an admin token.",
        )
    if not _contains(p, target):
        raise Forbidden(f"{what} {ident} is outside the token's scope", code="scope_insufficient")


def require_operator(p: Principal) -> None:
    if not p.is_operator:
        raise Forbidden("only an operator token may do this", code="operator_required")


def check_grant(p: Principal, kind: TokenKind, target: Scope | None, permissions: set[str]) -> None:
    """May ``p`` issue a token of ``kind`` for ``target`` carrying ``permissions``?"""
    allowed = {perm.value for perm in ALLOWED_PERMISSIONS[kind]}
    extra = permissions - allowed
    if extra:
        raise Unprocessable(f"{kind.value} tokens cannot carry {sorted(extra)}", code="permission_invalid")
    if kind is TokenKind.OPERATOR:
        require_operator(p)
        return
    if target is None:
        raise Unprocessable(f"a {kind.value} token needs a tenant_id", code="scope_missing")
    if kind is TokenKind.PUBLISHER and target.environment_id is None:
        raise Unprocessable("a publisher token needs an environment_id", code="scope_missing")
    require_admin(p, target, "scope", target.environment_id or target.project_id or target.tenant_id)
    if p.is_operator:
        return
    # A user admin cannot grant more than it holds (publish is the publisher's own capability).
    ungrantable = permissions - set(p.permissions) - {Permission.PUBLISH.value}
    if ungrantable:
        raise Forbidden(
            f"cannot grant permissions the caller lacks: {sorted(ungrantable)}", code="grant_exceeds_caller"
        )
