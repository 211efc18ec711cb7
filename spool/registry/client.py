"""A small blocking client of a schema registry's REST API (Confluent's v1), stdlib only.

What ``spool schemas`` and the Spark source/sink use to talk to ``spool registry`` (or
Confluent's, or Karapace): one ``RegistryClient(url, timeout)`` per use, each call one
HTTP request over ``urllib`` (no connection kept, nothing imported beyond the stdlib,
so ``spool schemas`` starts quickly and the client pickles to Spark executors).

Contract:

- Requests send ``application/vnd.schemaregistry.v1+json`` bodies and accept it back;
  answers are decoded JSON.
- An answer with an HTTP error status raises ``RegistryHTTPError`` carrying the status,
  Confluent's ``error_code`` and ``message`` (from the body when it is Confluent's
  ``{"error_code", "message"}``; else the status and the body's first line).
- No answer (refused, unresolvable, timed out, not HTTP) raises ``RegistryUnreachable``
  naming the URL and the reason. Nothing is retried.
- ``subject``/version path parts are percent-encoded (a subject may hold ``/``).
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
DEFAULT_URL = "http://127.0.0.1:8081"


class RegistryClientError(Exception):
    """Any failure of a registry call: ``str(e)`` is one line for the user."""


class RegistryHTTPError(RegistryClientError):
    """The registry answered with an error: Confluent's status, error_code and message."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(f"{message} (error_code {error_code})")
        self.status = status
        self.error_code = error_code
        self.message = message


class RegistryUnreachable(RegistryClientError):
    """No HTTP answer from the registry at ``url``."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot reach the schema registry at {url}: {reason}")
        self.url = url
        self.reason = reason


def _part(value: object) -> str:
    return urllib.parse.quote(str(value), safe="")


class RegistryClient:
    """Blocking calls to one registry; ``url`` may carry ``user:password@`` (basic auth)."""

    def __init__(self, url: str = DEFAULT_URL, timeout: float = 30.0) -> None:
        parts = urllib.parse.urlsplit(url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise RegistryClientError(f"not a registry URL (http://host:port): {url!r}")
        self._auth = None
        if parts.username is not None:
            creds = f"{urllib.parse.unquote(parts.username)}:" \
                    f"{urllib.parse.unquote(parts.password or '')}"
            self._auth = "Basic " + base64.b64encode(creds.encode()).decode()
            netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
            parts = parts._replace(netloc=netloc)
        self.url = urllib.parse.urlunsplit(parts)
        self.timeout = timeout

    # -- the raw call ------------------------------------------------------------------

    def call(self, method: str, path: str, body: Any = None,
             params: dict[str, Any] | None = None) -> Any:
        """``method`` ``path`` (already encoded, from ``/``) with a JSON ``body``; the
        answer's JSON (None for an empty body)."""
        query = {k: str(v).lower() if isinstance(v, bool) else str(v)
                 for k, v in (params or {}).items() if v is not None}
        url = self.url + path + (("?" + urllib.parse.urlencode(query)) if query else "")
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", f"{MEDIA_TYPE}, application/json")
        if data is not None:
            req.add_header("Content-Type", MEDIA_TYPE)
        if self._auth:
            req.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raise _http_error(e.code, e.read()) from None
        except urllib.error.URLError as e:
            reason = e.reason
            raise RegistryUnreachable(self.url, getattr(reason, "strerror", None)
                                      or str(reason)) from None
        except TimeoutError:
            raise RegistryUnreachable(self.url, f"no answer in {self.timeout:g} s") from None
        except (ConnectionError, OSError) as e:  # reset, or not HTTP at all
            raise RegistryUnreachable(self.url, str(e) or type(e).__name__) from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise RegistryClientError(f"the registry at {self.url} answered {path} with "
                                      f"something that is not JSON: {raw[:80]!r}") from None

    # -- Confluent's routes ------------------------------------------------------------

    def subjects(self, deleted: bool = False, prefix: str | None = None) -> list[str]:
        return self.call("GET", "/subjects", params={"deleted": deleted or None,
                                                     "subjectPrefix": prefix})

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        return self.call("GET", f"/subjects/{_part(subject)}/versions",
                         params={"deleted": deleted or None})

    def version(self, subject: str, version: int | str = "latest",
                deleted: bool = False) -> dict[str, Any]:
        return self.call("GET", f"/subjects/{_part(subject)}/versions/{_part(version)}",
                         params={"deleted": deleted or None})

    def by_id(self, schema_id: int) -> dict[str, Any]:
        return self.call("GET", f"/schemas/ids/{int(schema_id)}")

    def register(self, subject: str, schema: str, schema_type: str = "AVRO",
                 references: list[dict[str, Any]] | None = None) -> int:
        return int(self.call("POST", f"/subjects/{_part(subject)}/versions",
                             _schema_body(schema, schema_type, references))["id"])

    def check(self, subject: str, schema: str, schema_type: str = "AVRO",
              references: list[dict[str, Any]] | None = None,
              version: int | str | None = "latest") -> dict[str, Any]:
        """``{"is_compatible", "messages"}``; ``version`` None: against every version the
        subject's level asks for."""
        path = f"/compatibility/subjects/{_part(subject)}/versions"
        if version is not None:
            path += f"/{_part(version)}"
        return self.call("POST", path, _schema_body(schema, schema_type, references),
                         params={"verbose": True})

    def get_config(self, subject: str | None = None) -> str:
        path = "/config" + (f"/{_part(subject)}" if subject else "")
        params = {"defaultToGlobal": True} if subject else None
        return self.call("GET", path, params=params)["compatibilityLevel"]

    def set_config(self, level: str, subject: str | None = None) -> str:
        path = "/config" + (f"/{_part(subject)}" if subject else "")
        return self.call("PUT", path, {"compatibility": level})["compatibility"]

    def delete_config(self, subject: str) -> Any:
        return self.call("DELETE", f"/config/{_part(subject)}")

    def get_mode(self, subject: str | None = None) -> str:
        path = "/mode" + (f"/{_part(subject)}" if subject else "")
        params = {"defaultToGlobal": True} if subject else None
        return self.call("GET", path, params=params)["mode"]

    def set_mode(self, mode: str, subject: str | None = None, force: bool = False) -> str:
        path = "/mode" + (f"/{_part(subject)}" if subject else "")
        return self.call("PUT", path, {"mode": mode}, params={"force": force or None})["mode"]

    def delete_mode(self, subject: str) -> Any:
        return self.call("DELETE", f"/mode/{_part(subject)}")

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        return self.call("DELETE", f"/subjects/{_part(subject)}",
                         params={"permanent": permanent or None})

    def delete_version(self, subject: str, version: int | str,
                       permanent: bool = False) -> int:
        return self.call("DELETE", f"/subjects/{_part(subject)}/versions/{_part(version)}",
                         params={"permanent": permanent or None})


def _schema_body(schema: str, schema_type: str,
                 references: list[dict[str, Any]] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"schema": schema}
    if schema_type.upper() != "AVRO":
        body["schemaType"] = schema_type.upper()
    if references:
        body["references"] = references
    return body


def _http_error(status: int, raw: bytes) -> RegistryHTTPError:
    try:
        doc = json.loads(raw)
        return RegistryHTTPError(status, int(doc["error_code"]), str(doc["message"]))
    except (ValueError, KeyError, TypeError):
        text = raw.decode(errors="replace").strip().splitlines()
        return RegistryHTTPError(status, status, text[0] if text else f"HTTP {status}")
