"""Pulsar authentication providers, with the official client's names.

``Client(url, authentication=AuthenticationToken(...))``; see docs/authentication.md.
"""

from msgclient.auth.base import Authentication
from msgclient.auth.oauth2 import AuthenticationOauth2
from msgclient.auth.tls import AuthenticationTLS
from msgclient.auth.token import AuthenticationToken

__all__ = ["Authentication", "AuthenticationOauth2", "AuthenticationTLS", "AuthenticationToken"]
