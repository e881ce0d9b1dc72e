"""A stand-in for Microsoft Entra ID's token service, over HTTPS on loopback, as Azure workload
identity uses it: the pod's projected service-account token (a file) is exchanged for an access
token to Azure Storage, by the OAuth 2.0 client-credentials grant with a JWT client assertion.

It answers what MSAL (under azure-identity's WorkloadIdentityCredential) asks, and is strict where
the real service is strict for this grant:
  * `GET /TENANT/v2.0/.well-known/openid-configuration` - the tenant's endpoints;
  * `POST /TENANT/oauth2/v2.0/token` - only for this tenant, the registered client id, the
    jwt-bearer assertion type, the federated token it trusts (byte for byte) and the scope
    `https://storage.azure.com/.default`; anything else is Entra's own error shape (400/401),
    never a token.

The access token is a JWT with the claims Azurite's OAuth mode checks (an Entra issuer, the
storage audience, a lifetime). Its signature is an HMAC of a key of this test's own: Azurite
does not verify signatures (its docs say so), which is why the issuance rules above are checked
here rather than there.

Every token request is kept (`requests`) so a test can say what was sent - and that no secret
but the federated token was.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import ssl
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

from .servers import free_port
from .tls import TestAuthority

STORAGE_SCOPE = "https://storage.azure.com/.default"
JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class EntraStandIn:
    """One tenant with one app registration that trusts one federated token."""

    def __init__(self, tls: TestAuthority) -> None:
        self.tenant = str(uuid.uuid4())
        self.client_id = str(uuid.uuid4())
        self.federated_token = f"k8s-sa-token-{uuid.uuid4().hex}"
        self.requests: list[dict[str, str]] = []
        self._signing_key = uuid.uuid4().bytes
        self.port = free_port()
        self.authority_host = f"https://127.0.0.1:{self.port}"
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls.cert, tls.key)
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def env(self, token_file: str) -> dict[str, str]:
        """What AKS's workload identity webhook puts in a pod's environment."""
        return {
            "AZURE_CLIENT_ID": self.client_id,
            "AZURE_TENANT_ID": self.tenant,
            "AZURE_FEDERATED_TOKEN_FILE": token_file,
            "AZURE_AUTHORITY_HOST": self.authority_host + "/",
        }

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def access_token(self) -> str:
        now = int(time.time())
        claims = {
            "aud": "https://storage.azure.com",
            "iss": f"https://sts.windows.net/{self.tenant}/",
            "iat": now - 60,
            "nbf": now - 60,
            "exp": now + 3600,
            "appid": self.client_id,
            "tid": self.tenant,
            "ver": "1.0",
        }
        head = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        body = _b64(json.dumps(claims).encode())
        mac = hmac.new(self._signing_key, f"{head}.{body}".encode(), hashlib.sha256).digest()
        return f"{head}.{body}.{_b64(mac)}"

    def _refusal(self, form: dict[str, str]) -> tuple[int, str, str] | None:
        """(status, error, description) when Entra would refuse this request, else None."""
        if form.get("grant_type") != "client_credentials":
            return 400, "unsupported_grant_type", "AADSTS70003: the grant type is not supported"
        if form.get("client_id") != self.client_id:
            return 400, "unauthorized_client", "AADSTS700016: application not found"
        if form.get("client_assertion_type") != JWT_BEARER:
            return 400, "invalid_request", "AADSTS50027: invalid client assertion type"
        if not hmac.compare_digest(form.get("client_assertion", ""), self.federated_token):
            return 401, "invalid_client", "AADSTS700213: no matching federated identity record"
        if STORAGE_SCOPE not in form.get("scope", "").split():
            return 400, "invalid_scope", "AADSTS70011: the scope is not valid"
        return None

    def _handler(self):
        stand_in = self
        tenant_path = f"/{self.tenant}"

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet: the test reads `requests`
                pass

            def _answer(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == f"{tenant_path}/v2.0/.well-known/openid-configuration":
                    base = stand_in.authority_host + tenant_path
                    return self._answer(
                        200,
                        {
                            "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                            "token_endpoint": f"{base}/oauth2/v2.0/token",
                            "issuer": f"{base}/v2.0",
                        },
                    )
                self._answer(404, {"error": "invalid_tenant", "error_description": self.path})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                fields = parse_qs(self.rfile.read(length).decode())
                form = {key: values[0] for key, values in fields.items()}
                if self.path != f"{tenant_path}/oauth2/v2.0/token":
                    return self._answer(404, {"error": "invalid_tenant"})
                stand_in.requests.append(form)
                refusal = stand_in._refusal(form)
                if refusal:
                    status, error, description = refusal
                    return self._answer(status, {"error": error, "error_description": description})
                self._answer(
                    200,
                    {
                        "token_type": "Bearer",
                        "expires_in": 3600,
                        "ext_expires_in": 3600,
                        "access_token": stand_in.access_token(),
                    },
                )

        return Handler
