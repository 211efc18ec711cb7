"""A non-primary's writes, sent to the primary as the REST calls a client would make.

``Forwarder(timeout)`` holds one aiohttp session; each method is one ``model.Registry``
write, made against ``url`` (the primary's advertised URL) through Confluent's v1 route
for it, and returns what the method returns. The primary's error answers come back as
the same ``RegistryError`` (its status, ``error_code`` and message); a primary that
cannot be connected to raises ``Unreachable`` (50003; nothing was sent, so the caller
may try again, once another primary is elected), a timeout or an answer that is not the
API's raises 50003 (``forward_error``).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import aiohttp

from spool.registry.auth import FORWARDED_AUTHORIZATION
from spool.registry.model import Reference, RegistryError, forward_error

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"


class Unreachable(RegistryError):
    """The primary could not be connected to: the request was not sent."""


def _path(*parts: str | int) -> str:
    return "/" + "/".join(quote(str(p), safe="") for p in parts)


class Forwarder:
    """HTTP calls to the primary (module doc)."""

    def __init__(self, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    async def register(self, url: str, subject: str, schema: str, schema_type: str,
                       references: list[Reference], schema_id: int | None = None,
                       version: int | None = None) -> int:
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        if references:
            body["references"] = [{"name": r.name, "subject": r.subject,
                                   "version": r.version} for r in references]
        if schema_id is not None:
            body["id"] = schema_id
        if version is not None:
            body["version"] = version
        answer = await self._call("POST", url, _path("subjects", subject, "versions"), body)
        return int(answer["id"])

    async def delete_subject(self, url: str, subject: str, permanent: bool = False) -> list[int]:
        answer = await self._call("DELETE", url, _path("subjects", subject),
                                  params={"permanent": _bool(permanent)})
        return [int(v) for v in answer]

    async def delete_version(self, url: str, subject: str, version: int | str,
                             permanent: bool = False) -> int:
        answer = await self._call("DELETE", url, _path("subjects", subject, "versions", version),
                                  params={"permanent": _bool(permanent)})
        return int(answer)

    async def set_config(self, url: str, subject: str | None, level: str) -> str:
        answer = await self._call("PUT", url, _config_path("config", subject),
                                  {"compatibility": level})
        return _level(answer)

    async def delete_config(self, url: str, subject: str | None) -> str:
        return _level(await self._call("DELETE", url, _config_path("config", subject)))

    async def set_mode(self, url: str, subject: str | None, mode: str,
                       force: bool = False) -> str:
        answer = await self._call("PUT", url, _config_path("mode", subject), {"mode": mode},
                                  params={"force": _bool(force)})
        return _level(answer)

    async def delete_mode(self, url: str, subject: str | None) -> str:
        return _level(await self._call("DELETE", url, _config_path("mode", subject)))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(self, method: str, url: str, path: str, body: Any = None,
                    params: dict[str, str] | None = None) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout))
        headers = {"Accept": MEDIA_TYPE}
        authorization = FORWARDED_AUTHORIZATION.get()  # the client's, for the primary
        if authorization:
            headers["Authorization"] = authorization
        data = None
        if body is not None:
            headers["Content-Type"] = MEDIA_TYPE
            data = json.dumps(body)
        target = url.rstrip("/") + path
        try:
            async with self._session.request(method, target, data=data, headers=headers,
                                             params=params) as response:
                text = await response.text()
                status = response.status
        except aiohttp.ClientConnectorError as e:
            error = forward_error(f"{method} {target}: {e}")
            raise Unreachable(error.status, error.error_code, error.message) from None
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            raise forward_error(f"{method} {target}: {e or type(e).__name__}") from None
        try:
            answer = json.loads(text)
        except ValueError:
            raise forward_error(f"{method} {target}: {status} {text[:200]!r}") from None
        if status >= 400:
            if isinstance(answer, dict) and isinstance(answer.get("error_code"), int):
                raise RegistryError(status, answer["error_code"], str(answer.get("message")))
            raise forward_error(f"{method} {target}: {status} {text[:200]!r}")
        return answer


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _config_path(what: str, subject: str | None) -> str:
    return _path(what) if subject is None else _path(what, subject)


def _level(answer: Any) -> str:
    if isinstance(answer, dict):
        for key in ("compatibilityLevel", "compatibility", "mode"):
            if isinstance(answer.get(key), str):
                return answer[key]
    raise forward_error(f"unexpected answer {answer!r}")
