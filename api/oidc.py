"""The console's OpenID Connect client: discovery, the authorization request, the code exchange
and the ID token's verification.

Authlib (the `oidc` extra) does the protocol's parts that are easy to get wrong: the authorization
URL with its PKCE challenge (S256), and the ID token's checks, its signature against the
provider's published keys (JWKS, refetched once when a key id is new: the provider rotated) with
only the algorithms the provider announces, then iss, aud, exp, iat, nonce, azp and at_hash.
aiohttp carries the three requests (discovery, keys, token). The discovery document and keys are
kept for an hour; the issuer the document names must be the one configured.
"""

from __future__ import annotations

import importlib.util
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import aiohttp
import msgspec

from cronos.errors import ConfigError
from cronos.settings import Settings

if TYPE_CHECKING:
    from joserfc.jwk import KeySet

SCOPE = "openid email profile"
CALLBACK_PATH = "/auth/callback"
CACHE_S = 3600.0
TIMEOUT_S = 10.0
LEEWAY_S = 60  # clocks of this host and the provider may differ this much
# Only asymmetric signatures: a shared-secret (HS*) ID token is not verified with published keys.
_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


class SignInFailed(Exception):
    """The provider could not be reached or answered something Cronos cannot use (a 502)."""


class TokenRefused(Exception):
    """The provider's answer was reached but does not sign anyone in (a 400): says why."""


class Metadata(msgspec.Struct, kw_only=True):
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    end_session_endpoint: str | None = None
    id_token_signing_alg_values_supported: list[str] = msgspec.field(default_factory=lambda: ["RS256"])


def redirect_uri(settings: Settings) -> str:
    return settings.oidc_redirect_base + CALLBACK_PATH


def provider_name(settings: Settings) -> str:
    """The words of the sign-in button: configured, else the issuer's host."""
    return settings.oidc_provider_name or settings.oidc_issuer.split("://", 1)[-1].split("/", 1)[0]


def algorithms(meta: Metadata) -> list[str]:
    return [alg for alg in meta.id_token_signing_alg_values_supported if alg in _ALGORITHMS]


def check_installed() -> None:
    """Sign-in needs the `oidc` extra: without it the API refuses to start, in one line."""
    if importlib.util.find_spec("authlib") is None:
        raise ConfigError("CRONOS_OIDC_ISSUER is set but Authlib is not installed: pip install 'cronos[oidc]'")


class OidcClient:
    """One per API process; holds the discovery document and keys (an hour), nothing per person.
    Authlib and joserfc are imported where used: the API without sign-in runs without them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._meta: tuple[float, Metadata] | None = None
        self._keys: tuple[float, KeySet] | None = None

    async def _get(self, url: str) -> Any:
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as http,
                http.get(url, headers={"Accept": "application/json"}) as resp,
            ):
                resp.raise_for_status()
                return await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise SignInFailed(f"the identity provider did not answer {url}: {type(exc).__name__}") from exc

    async def metadata(self) -> Metadata:
        now = time.monotonic()
        if self._meta is not None and now - self._meta[0] < CACHE_S:
            return self._meta[1]
        url = self.settings.oidc_issuer + "/.well-known/openid-configuration"
        try:
            meta = msgspec.convert(await self._get(url), Metadata)
        except msgspec.ValidationError as exc:
            raise SignInFailed(f"the identity provider's discovery document is not usable: {exc}") from exc
        if meta.issuer.rstrip("/") != self.settings.oidc_issuer:
            raise SignInFailed(f"the discovery document names issuer {meta.issuer!r}, not CRONOS_OIDC_ISSUER")
        if not algorithms(meta):
            raise SignInFailed("the identity provider signs ID tokens with no asymmetric algorithm Cronos accepts")
        self._meta = (now, meta)
        return meta

    async def keys(self, *, fresh: bool = False) -> KeySet:
        now = time.monotonic()
        if not fresh and self._keys is not None and now - self._keys[0] < CACHE_S:
            return self._keys[1]
        from joserfc.errors import JoseError
        from joserfc.jwk import KeySet

        meta = await self.metadata()
        try:
            keys = KeySet.import_key_set(await self._get(meta.jwks_uri))
        except (JoseError, ValueError, TypeError, KeyError) as exc:
            raise SignInFailed(f"the identity provider's keys are not usable: {type(exc).__name__}") from exc
        self._keys = (now, keys)
        return keys

    def _oauth(self) -> Any:
        from authlib.oauth2.client import OAuth2Client  # type: ignore[import-untyped,unused-ignore]

        return OAuth2Client(
            None,
            client_id=self.settings.oidc_client_id,
            client_secret=self.settings.oidc_client_secret,
            redirect_uri=redirect_uri(self.settings),
            scope=SCOPE,
            code_challenge_method="S256",
        )

    async def authorization_url(self, state: str, nonce: str, code_verifier: str) -> str:
        meta = await self.metadata()
        url, _ = self._oauth().create_authorization_url(
            meta.authorization_endpoint, state=state, code_verifier=code_verifier, nonce=nonce
        )
        return str(url)

    async def exchange(self, code: str, code_verifier: str) -> dict[str, Any]:
        """The token endpoint's answer to this code (client_secret_basic, with the PKCE verifier)."""
        meta = await self.metadata()
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri(self.settings),
            "code_verifier": code_verifier,
        }
        # RFC 6749 2.3.1: the id and secret are form-encoded before they are joined and base64-encoded.
        auth = aiohttp.BasicAuth(
            quote(self.settings.oidc_client_id, safe=""), quote(self.settings.oidc_client_secret, safe="")
        )
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as http,
                http.post(meta.token_endpoint, data=form, auth=auth, headers={"Accept": "application/json"}) as resp,
            ):
                answer = await resp.json(content_type=None)
                status = resp.status
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise SignInFailed(f"the identity provider's token endpoint did not answer: {type(exc).__name__}") from exc
        if not isinstance(answer, dict):
            raise SignInFailed("the identity provider's token endpoint answered something other than a JSON object")
        if status >= 400 or "error" in answer:
            raise TokenRefused(f"the identity provider refused the code: {answer.get('error', status)}")
        if not isinstance(answer.get("id_token"), str):
            raise TokenRefused("the identity provider's answer holds no ID token")
        return answer

    async def verify(self, id_token: str, *, nonce: str, access_token: str | None) -> dict[str, Any]:
        """The ID token's claims once its signature and claims hold; TokenRefused says why not."""
        from authlib.oidc.core import CodeIDToken  # type: ignore[import-untyped,unused-ignore]
        from joserfc import jwt
        from joserfc.errors import InvalidKeyIdError, JoseError
        from joserfc.jws import JWSRegistry

        meta = await self.metadata()
        registry = JWSRegistry(algorithms=algorithms(meta), strict_check_header=False)
        try:
            try:
                token = jwt.decode(id_token, key=await self.keys(), registry=registry)
            except InvalidKeyIdError:  # a key the cached set lacks: the provider rotated its keys
                token = jwt.decode(id_token, key=await self.keys(fresh=True), registry=registry)
            options = {
                "iss": {"essential": True, "value": meta.issuer},
                "aud": {"essential": True, "value": self.settings.oidc_client_id},
                "exp": {"essential": True},
            }
            params = {"nonce": nonce, "client_id": self.settings.oidc_client_id}
            if access_token:
                params["access_token"] = access_token
            claims = CodeIDToken(token.claims, token.header, options, params)
            claims.validate(leeway=LEEWAY_S)
        except JoseError as exc:
            raise TokenRefused(f"the ID token was refused: {exc.error}: {exc.description or ''}".rstrip(": ")) from exc
        return dict(claims)
