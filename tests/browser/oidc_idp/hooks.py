"""The ID token carries the person's groups (the claim Cronos maps to scopes) and email."""

from __future__ import annotations

from typing import Any


def groups_and_email(id_token: dict[str, Any], user: Any, token: Any, request: Any, **kwargs: Any) -> dict[str, Any]:
    id_token["groups"] = sorted(user.groups.values_list("name", flat=True))
    id_token["email"] = user.email
    return id_token
