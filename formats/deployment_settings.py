"""How every command and process finds its deployment: flags, then environment, then ``stack.json``.

One resolver for all of them, as a pydantic-settings source. A settings class that needs
deployment coordinates or tokens derives from :class:`DeploymentSettings` and names, in
``stack_fields``, which of its fields the running embedded stack's state file can fill (field
name -> key in ``stack.json``, dotted for nested keys). Its sources are then, highest first:

1. the constructor's keyword arguments (the CLI's flags),
2. its environment variables (``BAML_STUDIO_<PROCESS>_*``, the publisher's ``BAML_PUBLISHER_*``),
3. the running stack's ``<run dir>/stack.json`` (:class:`StackFileSource`),
4. the field's default.

The run directory is the ``stack_run_dir`` setting (flag ``--run-dir``), else
``BAML_STUDIO_STACK_RUN_DIR``, else ``./run/stack``. A state file counts only while its launcher
process is alive and the stack is starting or healthy: a stopped stack's tokens are not offered.

This module needs only the standard library and pydantic-settings: the publisher imports it, and
the publisher must stay installable without the server packages.

It also holds the two rules about secrets that every process shares: how a secret is shown
(:func:`mask_secret`), and that the development placeholder credentials are refused outside the
embedded stack (:func:`refuse_placeholder_credentials`).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, SecretStr
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

STATE_FILE = "stack.json"
STACK_RUN_DIR_ENV = "BAML_STUDIO_STACK_RUN_DIR"
DEFAULT_STACK_RUN_DIR = Path("run/stack")

# Set by the stack launcher for every child it starts: the one sign that a process belongs to the
# embedded development stack, where the placeholder credentials below are expected.
EMBEDDED_STACK_ENV = "BAML_STUDIO_EMBEDDED_STACK"

# The credentials the settings default to: moto's "any key works" values. Anywhere but the
# embedded stack they mean "not configured", never a real key.
PLACEHOLDER_CREDENTIALS = frozenset({"test"})

# Which command prints the stack's tokens (named by every missing-token error).
SHOW_SECRETS_COMMAND = "baml-studio stack status --show-secrets"

_LIVE_STATUSES = ("starting", "healthy")


class ConfigurationError(ValueError):
    """A setting is missing or not allowed here; the message names it and what to do."""


class MissingSettingError(ConfigurationError):
    """A required setting (usually a token) is missing or empty."""

    def __init__(self, setting: str, *, env: str, flag: str | None = None, hint: str | None = None):
        where = f"`{flag}` or {env}" if flag else env
        text = f"no {setting}: set {where}"
        if hint:
            text += f"; {hint}"
        super().__init__(text)
        self.setting, self.env, self.flag = setting, env, flag


class PlaceholderCredentialsError(ConfigurationError):
    """A process outside the embedded stack was left with the development placeholder credentials."""


# --- the state file ---------------------------------------------------------------------------


def pid_alive(pid: int | None) -> bool:
    """Whether ``pid`` names a live process (a zombie counts as gone)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); treat it as gone (it is our own unreaped child at most).
    with contextlib.suppress(OSError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def stack_run_dir(run_dir: Path | str | None = None) -> Path:
    """The argument, else ``BAML_STUDIO_STACK_RUN_DIR``, else ``./run/stack`` (absolute)."""
    chosen = run_dir if run_dir not in (None, "") else os.environ.get(STACK_RUN_DIR_ENV) or None
    return Path(chosen or DEFAULT_STACK_RUN_DIR).expanduser().resolve()


def running_stack_document(run_dir: Path | str | None = None) -> dict[str, Any] | None:
    """The parsed ``stack.json`` of a stack running from ``run_dir``, or None (none, stopped, unreadable)."""
    path = stack_run_dir(run_dir) / STATE_FILE
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("status") not in _LIVE_STATUSES:
        return None
    pid = document.get("launcher_pid")
    return document if isinstance(pid, int) and pid_alive(pid) else None


def _lookup(document: Mapping[str, Any], dotted: str) -> Any:
    value: Any = document
    for part in dotted.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


class StackFileSource(PydanticBaseSettingsSource):
    """Fills the fields a settings class names in ``stack_fields`` from the running stack's state file.

    Only fields that no higher source (arguments, environment) set are filled, so a flag or a
    variable always wins; a value the stack does not have (null) leaves the default.
    """

    def __init__(self, settings_cls: type[BaseSettings]):
        super().__init__(settings_cls)
        self.fields: Mapping[str, str] = getattr(settings_cls, "stack_fields", {})

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        # Required by the base class; __call__ below reads the whole file once instead.
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        earlier = self.current_state
        wanted = {name: key for name, key in self.fields.items() if name not in earlier}
        if not wanted:
            return {}
        document = running_stack_document(earlier.get("stack_run_dir"))
        if document is None:
            return {}
        found = {name: _lookup(document, key) for name, key in wanted.items()}
        return {name: value for name, value in found.items() if value is not None}


class DeploymentSettings(BaseSettings):
    """Base of the settings classes that find a deployment: argument → environment → stack.json → default."""

    stack_fields: ClassVar[Mapping[str, str]] = {}

    stack_run_dir: Path | None = Field(
        default=None,
        description="Embedded stack run directory whose stack.json fills unset values; unset: "
        f"{STACK_RUN_DIR_ENV}, else ./run/stack.",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            env_settings,
            dotenv_settings,
            StackFileSource(settings_cls),
            file_secret_settings,
        )


def require_setting(
    value: str | SecretStr | None,
    *,
    setting: str,
    env: str,
    flag: str | None = None,
    run_dir: Path | str | None = None,
) -> str:
    """``value`` (stripped), or a :class:`MissingSettingError` that names the setting and the way out."""
    text = reveal(value).strip()
    if text:
        return text
    directory = stack_run_dir(run_dir)
    if running_stack_document(directory) is None:
        hint = (
            f"no embedded stack is running from {directory} to lend its own (`baml-studio stack up` "
            f"starts one; `{SHOW_SECRETS_COMMAND}` prints its tokens)"
        )
    else:
        hint = f"it is set but empty: unset it to use the running stack's (`{SHOW_SECRETS_COMMAND}`)"
    raise MissingSettingError(setting, env=env, flag=flag, hint=hint)


# --- secrets -----------------------------------------------------------------------------------


def reveal(secret: str | SecretStr | None) -> str:
    """The plain value at its point of use ("" for None)."""
    if secret is None:
        return ""
    return secret.get_secret_value() if isinstance(secret, SecretStr) else secret


def mask_secret(secret: str | SecretStr | None) -> str:
    """A form safe to print: the token's kind prefix and its last four characters (``bst_op_…a1b2``).

    A secret too short to lose four characters and keep most of its value (moto's ``test``) shows
    as ``…`` alone: printing its tail would print it.
    """
    value = reveal(secret)
    if not value:
        return "-"
    prefix = ""
    if value.startswith("bst_") and value.count("_") >= 2:
        prefix = value[: value.index("_", 4) + 1]
    rest = value[len(prefix) :]
    tail = rest[-4:] if len(rest) >= 16 else ""
    return f"{prefix}…{tail}"


def in_embedded_stack() -> bool:
    return os.environ.get(EMBEDDED_STACK_ENV, "").strip().lower() in ("1", "true", "yes")


def refuse_placeholder_credentials(process: str, credentials: Mapping[str, str | SecretStr | None]) -> None:
    """Refuse to start ``process`` outside the embedded stack with a placeholder credential.

    ``credentials`` maps each setting's environment variable to its value. Inside the embedded
    stack (``BAML_STUDIO_EMBEDDED_STACK=1``, set by the launcher) the placeholders are expected.
    """
    if in_embedded_stack():
        return
    placeholders = sorted(
        env for env, value in credentials.items() if reveal(value) in PLACEHOLDER_CREDENTIALS
    )
    if placeholders:
        raise PlaceholderCredentialsError(
            f"{process} refuses the development placeholder credentials outside the embedded stack: "
            f"set {', '.join(placeholders)} to real credentials (the embedded stack's launcher sets "
            f"{EMBEDDED_STACK_ENV}=1 for its own processes)"
        )
