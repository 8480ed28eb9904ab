"""A real OpenID provider for the sign-in tests: django-oidc-provider in a small Django project.

`seed` makes its SQLite database (migrations, an RSA signing key, two people in two groups, the
console's client); `python -m django runserver` serves it. Settings come from the environment
that tests/browser/test_sign_in.py gives it. Not a mock: discovery, the login page, the code,
the signed ID token and its JWKS are the package's own.
"""
