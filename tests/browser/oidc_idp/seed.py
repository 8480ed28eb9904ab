"""Make the test provider's database: `python -m tests.browser.oidc_idp.seed` (environment as settings)."""

from __future__ import annotations

import os

import django
from django.core.management import call_command

PEOPLE = (("alice", "ops"), ("bob", "viewers"))  # username, group; the password is OIDC_IDP_PASSWORD


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.browser.oidc_idp.settings")
    django.setup()
    from django.contrib.auth.models import Group, User
    from oidc_provider.models import Client, ResponseType

    call_command("migrate", verbosity=0)
    call_command("creatersakey")
    for name, group in PEOPLE:
        user = User.objects.create_user(name, f"{name}@example.com", os.environ["OIDC_IDP_PASSWORD"])
        user.groups.add(Group.objects.get_or_create(name=group)[0])
    client = Client.objects.create(
        name="Cronos console",
        client_type="confidential",
        client_id=os.environ["OIDC_IDP_CLIENT_ID"],
        client_secret=os.environ["OIDC_IDP_CLIENT_SECRET"],
        require_consent=False,
        reuse_consent=False,
    )
    client.redirect_uris = [os.environ["OIDC_IDP_REDIRECT"]]
    client.save()
    client.response_types.add(ResponseType.objects.get(value="code"))


if __name__ == "__main__":
    main()
