"""HTTP calls to a running broker, and the mapping of every failure to an exit code.

Exit codes (the same for every ``reginamq`` operator command):

- 0  ok
- 1  user error: bad arguments or input, or the broker answered 4xx (unknown queue, bad option, ...)
- 2  server error: the broker answered 5xx, or could not be reached (network, timeout)
- 3  auth: the broker (or a proxy in front of it) answered 401 or 403
- 4  nothing to do: the command was valid but found nothing to act on (see docs/operations.md)
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any
from urllib.parse import quote

import click
import httpx

from reginamq.ctl.output import Output

OK, USER_ERROR, SERVER_ERROR, AUTH_ERROR, NOTHING_TO_DO = 0, 1, 2, 3, 4
DEFAULT_URL = "http://127.0.0.1:6632"


class CtlError(click.ClickException):
    """A failure shown as ``Error: ...`` on stderr and turned into its exit code."""

    def __init__(self, message: str, exit_code: int = USER_ERROR, status: int | None = None):
        super().__init__(message)
        self.exit_code = exit_code
        self.status = status


def segment(name: str) -> str:
    """One path segment (queue, group or partition names may hold any character but a slash)."""
    return quote(name, safe="")


def exit_code_for(status: int) -> int:
    if status in (401, 403):
        return AUTH_ERROR
    if status >= 500:
        return SERVER_ERROR
    return USER_ERROR


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase
    if isinstance(body, dict):
        for key in ("error", "message", "reason"):
            if body.get(key):
                return str(body[key])
    return json.dumps(body)[:500]


class Client:
    """A synchronous client of one broker; every method raises :class:`CtlError` on failure."""

    def __init__(self, url: str, timeout: float = 30.0, token: str | None = None):
        self.url = url.rstrip("/")
        self.timeout = timeout
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.url, timeout=timeout, headers=headers)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def call(self, method: str, path: str, *, params: dict | None = None, body: Any = None,
             timeout: float | None = None, allow: tuple[int, ...] = ()) -> tuple[int, Any]:
        """(status, decoded JSON or None). A status >= 400 not in ``allow`` raises CtlError."""
        params = {k: (str(v).lower() if isinstance(v, bool) else v)
                  for k, v in (params or {}).items() if v is not None}
        kwargs: dict[str, Any] = {"params": params}
        if body is not None:
            kwargs["json"] = body
        if timeout is not None:
            kwargs["timeout"] = timeout
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TimeoutException as exc:
            raise CtlError(f"{method} {self.url}{path}: timed out ({type(exc).__name__})", SERVER_ERROR) from None
        except httpx.HTTPError as exc:
            raise CtlError(f"cannot reach the broker at {self.url}: {exc}", SERVER_ERROR) from None
        status = response.status_code
        if status >= 400 and status not in allow:
            raise CtlError(f"{method} {path}: {status} {_error_text(response)}", exit_code_for(status), status)
        if status == 204 or not response.content:
            return status, None
        try:
            return status, response.json()
        except ValueError:
            return status, response.text

    def get(self, path: str, **kwargs) -> Any:
        return self.call("GET", path, **kwargs)[1]

    def post(self, path: str, body: Any = None, **kwargs) -> Any:
        return self.call("POST", path, body=body, **kwargs)[1]

    def delete(self, path: str, **kwargs) -> Any:
        return self.call("DELETE", path, **kwargs)[1]


def env_url() -> str:
    return os.environ.get("REGINAMQ_URL") or DEFAULT_URL


# --- click plumbing shared by every operator command ----------------------------------------

class CtlCommand(click.Command):
    """A command whose usage errors (bad or missing arguments) exit 1, not click's 2."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            exc.exit_code = USER_ERROR
            raise


class CtlGroup(click.Group):
    """A command group with the same exit code for usage errors, also for unknown subcommands."""

    command_class = CtlCommand

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            exc.exit_code = USER_ERROR
            raise

    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            exc.exit_code = USER_ERROR
            raise


CtlGroup.group_class = CtlGroup


class Ctl:
    """What a command needs: the broker client and the output mode."""

    def __init__(self, url: str, json_output: bool, token: str | None, request_timeout: float):
        self.url = url
        self.out = Output(json_output)
        self._token, self._timeout = token, request_timeout
        self._client: Client | None = None

    @property
    def json(self) -> bool:
        return self.out.json

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client(self.url, self._timeout, self._token)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def connection_options(function):
    """Add --url/--json/--token/--request-timeout; the command receives a :class:`Ctl` first."""
    @click.option("--url", envvar="REGINAMQ_URL", default=DEFAULT_URL, show_default=True, metavar="URL",
                  help="The broker (also REGINAMQ_URL).")
    @click.option("--json", "json_output", is_flag=True, help="Machine output: JSON instead of tables.")
    @click.option("--token", envvar="REGINAMQ_TOKEN", default=None, metavar="TOKEN",
                  help="Send 'Authorization: Bearer TOKEN' (for a proxy in front of the broker; "
                       "also REGINAMQ_TOKEN).")
    @click.option("--request-timeout", type=click.FloatRange(0.1), default=30.0, show_default=True,
                  metavar="SECONDS", help="Timeout of one HTTP request.")
    @functools.wraps(function)
    def wrapper(*args, url, json_output, token, request_timeout, **kwargs):
        ctl = Ctl(url, json_output, token, request_timeout)
        try:
            return function(ctl, *args, **kwargs)
        finally:
            ctl.close()

    return wrapper


def nothing_to_do(ctl: Ctl, message: str | None = None) -> None:
    """Stop with exit code 4 (valid command, nothing to act on); the reason goes to stderr."""
    if message:
        ctl.out.note(message)
    raise click.exceptions.Exit(NOTHING_TO_DO)
