"""Tools the model can call: ``@tool``, the JSON Schema built from a signature, ``ToolRegistry``.

``@tool`` turns a plain function into a :class:`Tool`: its name, a description taken from the
docstring (Google, reST or NumPy style) and a JSON Schema object built from the type hints:

=====================================  ===================================================
Python annotation                      JSON Schema
=====================================  ===================================================
``str`` / ``int`` / ``float`` /        ``string`` / ``integer`` / ``number`` / ``boolean``
``bool``
``Literal["a", "b"]``                  ``{"type": "string", "enum": ["a", "b"]}``
an ``Enum`` subclass                   ``enum`` of the members' values
``list[X]``, ``tuple[X, ...]``,        ``{"type": "array", "items": <X>}``
``set[X]``
``dict`` / ``dict[str, X]``            ``{"type": "object"}`` (``additionalProperties: <X>``)
``X | None`` / ``Optional[X]``         ``X`` with ``"null"`` added to its ``type``
``X | Y``                              ``{"anyOf": [<X>, <Y>]}``
a dataclass / ``TypedDict``            a nested object with its own ``properties``/``required``
``Annotated[X, "text"]``               ``X`` with ``"text"`` as description
no annotation / ``Any``                ``{}`` (any JSON value)
=====================================  ===================================================

Tools living elsewhere (an MCP server's, from ``McpServer.tools()``) carry a ``runner`` instead:
the registry hands it the JSON arguments and the cancel event, unconverted.

A parameter with a default is not ``required`` (its default is written as ``"default"`` when
JSON can express it). A parameter named ``cancel`` is left out of the schema: the tool then
receives the chat's ``threading.Event`` there and should return early once it is set.

:meth:`ToolRegistry.execute` never raises (``KeyboardInterrupt``/``SystemExit`` aside): every
failure becomes ``ToolResult(ok=False, error=ErrorInfo(code=...))`` for the model to read:

* ``TOOL_NOT_FOUND``: no tool has that name;
* ``TOOL_INVALID_ARGUMENTS``: the raw arguments were not a JSON object, or they fail the schema's
  ``required``/``type`` checks (also ``enum``, ``additionalProperties: false`` and the usual
  bounds), or the function's signature cannot take them;
* ``TOOL_EXECUTION_FAILED``: the tool raised (message: exception type and text);
* ``TOOL_RESULT_INVALID``: the return value is not JSON-serialisable;
* ``CANCELLED``: the cancel event was set before the tool started (or the tool raised
  :class:`~ollm_lite.errors.Cancelled`);
* ``TOOL_TIMEOUT``: reserved for the chat runtime, which enforces :attr:`ToolRegistry.timeout`.

Arguments are passed on as the model sent them. The only conversions are for what JSON cannot
express: a value for an ``Enum`` parameter becomes the member, an object for a dataclass
parameter becomes an instance (recursively), an array for a ``tuple``/``set`` parameter becomes
one, and an integral number such as ``3.0`` for an ``int`` parameter becomes ``3`` (JSON Schema
counts it as an integer). On the way back a dataclass or ``Enum`` result is turned into JSON
data (``dataclasses.asdict`` / ``.value``); a tool may also return a :class:`ToolResult` itself.
"""

from __future__ import annotations

import collections
import dataclasses
import inspect
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from copy import deepcopy
from dataclasses import dataclass
from typing import Any, overload

from .._safe_text import exception_text, safe_str, type_name
from ..errors import Cancelled, OllmError
from ..types import ToolCall, ToolResult, ToolSchema
from ._calls import (
    Binding,
    InvalidArguments,
    failure,
    invalid_result,
    result_of,
    value_for_type as value_for_type,  # importable from here as before
)
from ._docstrings import parse_docstring
from ._schema import (
    ToolDefinitionError,
    schema_for_type as schema_for_type,  # importable from here as before
    signature_schema,
)
from ._validation import validate_arguments

__all__ = ["Tool", "ToolDefinitionError", "ToolRegistry", "tool"]

logger = logging.getLogger(__name__)

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ARGS_PREVIEW = 200


# --------------------------------------------------------------------------- the Tool value


@dataclass(frozen=True, slots=True)
class Tool:
    """A function the model may call, with the schema it is shown."""

    name: str
    """Name the model uses to call the tool (``[A-Za-z0-9_-]{1,64}``)."""
    description: str | None
    """What the tool does, for the model."""
    parameters: dict[str, Any]
    """JSON Schema (``{"type": "object", ...}``) of the keyword arguments."""
    fn: Callable[..., Any]
    """The function itself; called with the arguments as keywords."""
    accepts_cancel: bool = False
    """``fn`` takes a ``cancel`` keyword and receives the chat's ``threading.Event`` there."""
    runner: Callable[[dict[str, Any], threading.Event | None], ToolResult] | None = None
    """For tools that live elsewhere (an MCP server): runs a call from its JSON arguments and
    the cancel event, instead of ``fn``; the arguments reach it unconverted."""
    server: str | None = None
    """Name of the server the tool comes from; when tools given together share a name, such
    a tool is renamed ``<server>_<name>`` (local tools never are)."""

    def schema(self) -> ToolSchema:
        """The tool as the model sees it (a copy: providers may not change the tool).

        Returns:
            A :class:`~ollm_lite.types.ToolSchema` with the name, description and parameters.
        """
        return ToolSchema(self.name, self.description, deepcopy(self.parameters))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function directly, so a decorated function stays usable as before."""
        return self.fn(*args, **kwargs)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    fn: None = None, *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function into a :class:`Tool`; use as ``@tool`` or ``@tool(name=..., ...)``.

    Args:
        fn: The function (given when used as a bare decorator or called directly).
        name: Tool name; defaults to the function's ``__name__``.
        description: Tool description; defaults to the docstring's text before its sections.

    Returns:
        The tool, or a decorator that makes one when ``fn`` is not given.

    Raises:
        ToolDefinitionError: ``TOOL_INVALID_DEFINITION`` when the name is not
            ``[A-Za-z0-9_-]{1,64}``, a parameter is positional-only or ``*args``, or an
            annotation has no JSON Schema equivalent.
    """

    def build(func: Callable[..., Any]) -> Tool:
        return _make_tool(func, name=name, description=description)

    if fn is None:
        return build
    return build(fn)


def _make_tool(fn: Callable[..., Any], *, name: str | None, description: str | None) -> Tool:
    bound = _bound_tool(fn)
    if bound is not None:
        fn = bound
    if isinstance(fn, Tool):
        return dataclasses.replace(
            fn,
            name=_check_name(name or fn.name),
            description=description if description is not None else fn.description,
        )
    if not callable(fn):
        raise ToolDefinitionError(f"a tool must be a callable, not {type(fn).__name__}")
    tool_name = _check_name(name or getattr(fn, "__name__", "") or "")
    doc_text, arg_docs = parse_docstring(inspect.getdoc(fn))
    parameters, accepts_cancel = signature_schema(fn, tool_name, arg_docs)
    return Tool(
        name=tool_name,
        description=description if description is not None else doc_text,
        parameters=parameters,
        fn=fn,
        accepts_cancel=accepts_cancel,
    )


def _bound_tool(item: Any) -> Tool | None:
    """The :class:`Tool` of a schema bound to its server (``McpServer.tools()``), else ``None``."""
    as_tool = getattr(item, "as_tool", None)
    if isinstance(item, ToolSchema) and callable(as_tool):
        made = as_tool()
        if isinstance(made, Tool):
            return made
    return None


def _check_name(name: str) -> str:
    if not _NAME_RE.match(name):
        raise ToolDefinitionError(
            f"invalid tool name {name!r}: use 1-64 letters, digits, '_' or '-' "
            "(pass name=... to @tool)"
        )
    return name


# --------------------------------------------------------------------------- schema building


# --------------------------------------------------------------------------- the registry


class ToolRegistry:
    """The tools of a chat, by name; runs calls and turns every failure into a result.

    Besides functions and tools it accepts tool schemas bound to a server (what
    ``McpServer.tools()`` returns). When such a tool shares its name with another tool of the
    registry, it is renamed ``<server>_<name>`` (cut to ``[A-Za-z0-9_-]{1,64}``), with a counter
    (``_2``, ``_3`` …) when that name is taken too; local tools and unique names never change,
    and a renamed tool is still called on its server under its own name.

    Attributes:
        timeout: Per-call wall-clock limit in seconds the chat runtime enforces
            (``None``: no limit); a call over it gets a ``TOOL_TIMEOUT`` result.
    """

    def __init__(
        self,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        *,
        timeout: float | None = None,
    ) -> None:
        """Register ``tools`` (functions are wrapped with :func:`tool`).

        Raises:
            ToolDefinitionError: ``TOOL_INVALID_DEFINITION`` for a function that cannot be a
                tool or a second tool with a name already taken.
            ValueError: ``timeout`` is not a positive number.
        """
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
        ):
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.timeout = timeout
        self._tools: dict[str, Tool] = {}
        self._bindings: dict[str, Binding] = {}
        made = [_as_tool(item) for item in tools]
        counts = collections.Counter(t.name for t in made)
        for item in made:
            if counts[item.name] > 1 and item.server is not None:
                item = self._qualified(item)  # two tools given together share the name
            self.register(item)

    def register(self, fn_or_tool: Tool | Callable[..., Any]) -> Tool:
        """Add a tool (a plain function is wrapped with :func:`tool` first).

        Returns:
            The registered :class:`Tool`.

        A server's tool whose name is taken is renamed ``<server>_<name>``; a local tool whose
        name a server's tool holds takes the name, and that tool is renamed instead.

        Raises:
            ToolDefinitionError: ``TOOL_INVALID_DEFINITION`` when the function cannot be a tool
                or another tool already has the name (registering the same tool twice is fine).
        """
        item = _as_tool(fn_or_tool)
        existing = self._tools.get(item.name)
        if existing is not None:
            if existing is item or existing == item:
                return existing
            if item.server is not None:
                item = self._qualified(item)
            elif existing.server is not None:  # a server's tool makes room for a local one
                del self._tools[existing.name], self._bindings[existing.name]
                self._add(self._qualified(existing, keep=item.name))
            if item.name in self._tools:
                if self._tools[item.name] == item:
                    return self._tools[item.name]
                raise ToolDefinitionError(f"a tool named {item.name!r} is already registered")
        self._add(item)
        return item

    def _qualified(self, item: Tool, keep: str | None = None) -> Tool:
        """``item`` (a server's tool) renamed ``<server>_<name>``, cut to the characters and
        length names allow; when that name is taken too (servers reporting the same name, or
        one server's ``files/read`` and ``files.read``), a counter makes it unique: ``_2``,
        ``_3`` … Calls still reach the tool under its own name on its own server (the
        runner keeps it). ``keep``: a name about to be taken by another tool."""
        assert item.server is not None
        base = re.sub(r"[^A-Za-z0-9_-]", "_", f"{item.server}_{item.name}")[:64]
        name, number = base, 1
        while True:
            renamed = dataclasses.replace(item, name=name)
            if name != keep and self._tools.get(name, renamed) == renamed:
                return renamed  # free, or this very tool given twice
            number += 1
            suffix = f"_{number}"
            name = base[: 64 - len(suffix)] + suffix

    def _add(self, item: Tool) -> None:
        if item.name in self._tools:
            raise ToolDefinitionError(f"a tool named {item.name!r} is already registered")
        self._tools[item.name] = item
        self._bindings[item.name] = Binding.of(item.fn)

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Tool names in registration order."""
        return list(self._tools)

    def schemas(self) -> list[ToolSchema]:
        """Every tool as the model sees it, in registration order."""
        return [t.schema() for t in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __repr__(self) -> str:
        return f"ToolRegistry({self.names()!r}, timeout={self.timeout!r})"

    def execute(self, call: ToolCall, cancel: threading.Event | None = None) -> ToolResult:
        """Run one tool call. Never raises (``KeyboardInterrupt``/``SystemExit`` pass through).

        Args:
            call: The call as the model made it.
            cancel: The chat's cancel event; passed to tools that take ``cancel`` (they get a
                fresh, never-set event when it is ``None``).

        Returns:
            ``ToolResult(ok=True, data=...)``, or ``ok=False`` with ``error.code`` one of
            ``CANCELLED``, ``TOOL_NOT_FOUND``, ``TOOL_INVALID_ARGUMENTS``,
            ``TOOL_EXECUTION_FAILED``, ``TOOL_RESULT_INVALID``.
        """
        try:
            return self._execute(call, cancel)
        except Exception as exc:  # a bug in a hook we do not control (e.g. a broken __eq__)
            logger.debug("tool call: unexpected failure", exc_info=True)
            return failure(
                "TOOL_EXECUTION_FAILED", exception_text(exc), {"exception": type_name(exc)}
            )

    def _execute(self, call: ToolCall, cancel: threading.Event | None) -> ToolResult:
        if cancel is not None and cancel.is_set():
            return failure("CANCELLED", f"tool {call.name!r} was not started: cancelled")
        item = self._tools.get(call.name)
        if item is None:
            return failure(
                "TOOL_NOT_FOUND",
                f"no tool named {call.name!r}; available: {', '.join(self.names()) or 'none'}",
                {"name": call.name, "available": self.names()},
            )
        invalid = self._check_arguments(item, call)
        if invalid is not None:
            return invalid
        if item.runner is not None:
            return self._run_remote(item, call, cancel)
        try:
            kwargs = self._bindings[item.name].arguments(
                # A copy: a tool that changes its arguments must not change the call, which
                # belongs to the caller (a scripted turn, the history, an event already yielded).
                deepcopy(call.args),
                (cancel or threading.Event()) if item.accepts_cancel else None,
            )
        except InvalidArguments as exc:
            return failure(
                "TOOL_INVALID_ARGUMENTS", f"tool {item.name!r}: {exc}", {"errors": [str(exc)]}
            )
        return self._run(item, kwargs, cancel)

    def _check_arguments(self, item: Tool, call: ToolCall) -> ToolResult | None:
        raw = call.arguments or ""
        if not call.args and raw.strip() and not _is_json_object(raw):
            return failure(
                "TOOL_INVALID_ARGUMENTS",
                f"tool {item.name!r}: the arguments are not a JSON object",
                {"arguments": raw[:_ARGS_PREVIEW]},
            )
        errors = validate_arguments(call.args, item.parameters)
        if errors:
            return failure(
                "TOOL_INVALID_ARGUMENTS",
                f"tool {item.name!r}: {'; '.join(errors)}",
                {"errors": errors},
            )
        return None

    def _run_remote(self, item: Tool, call: ToolCall, cancel: threading.Event | None) -> ToolResult:
        assert item.runner is not None
        try:
            result: Any = item.runner(dict(call.args), cancel)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # the runner promises results, but a bug is a failure
            logger.debug("tool %s raised", item.name, exc_info=True)
            return failure("TOOL_EXECUTION_FAILED", f"{type(exc).__name__}: {exc}")
        if isinstance(result, ToolResult):
            return result
        return failure(
            "TOOL_RESULT_INVALID",
            f"tool {item.name!r} returned {type(result).__name__}, not a ToolResult",
        )

    def _run(
        self, item: Tool, kwargs: dict[str, Any], cancel: threading.Event | None
    ) -> ToolResult:
        started = time.monotonic()
        try:
            value = item.fn(**kwargs)
        except Cancelled as exc:
            return failure("CANCELLED", f"tool {item.name!r} was cancelled: {safe_str(exc)}")
        except KeyboardInterrupt:
            raise  # Ctrl-C on the calling thread stops the program, not just the tool
        except BaseException as exc:  # SystemExit, asyncio.CancelledError ... are tool failures
            logger.debug("tool %s raised", item.name, exc_info=True)
            details: dict[str, Any] = {"exception": type_name(exc)}
            if isinstance(exc, OllmError) and isinstance(exc.code, str):
                details["code"] = exc.code
            return failure("TOOL_EXECUTION_FAILED", exception_text(exc), details)
        finally:
            logger.debug("tool %s ran for %.3fs", item.name, time.monotonic() - started)
        try:
            return result_of(item.name, value)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # foreign code in the value (asdict, __iter__ ...) failed
            return invalid_result(item.name, value, exc)


def _as_tool(item: Tool | Callable[..., Any]) -> Tool:
    if isinstance(item, Tool):
        return item
    return _bound_tool(item) or tool(item)


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False
