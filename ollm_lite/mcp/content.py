"""A ``tools/call`` result as the :class:`~ollm_lite.types.ToolResult` the model reads.

MCP specification, Server > Tools > Tool Result: a result carries ``content`` (a list of
text, image, audio, ``resource_link`` and embedded ``resource`` items), optionally
``structuredContent`` (a JSON object, 2025-06-18 and later) and ``isError``. The mapping:

* ``isError: true`` → ``ok=False`` with code ``TOOL_EXECUTION_FAILED``, the text items as the
  message and every item in ``details["content"]`` (the model reads the server's own words);
* ``structuredContent`` present → ``data`` is that object (the spec asks servers to repeat it
  as text in ``content`` for older clients, so nothing is lost);
* a single text item → ``data`` is its text;
* anything else → ``data`` is the list of items, each a plain dict: ``{"type": "text",
  "text"}``, ``{"type": "image" | "audio", "mimeType", "data"}`` (base64, as sent),
  ``{"type": "resource", "uri", "mimeType"?, "text" | "blob"}``, ``{"type": "resource_link",
  "uri", "name", ...}``; unknown item types pass through unchanged.

:func:`tool_result` never raises: a result that breaks the schema becomes ``ok=False`` with
code ``TOOL_RESULT_INVALID``.
"""

from __future__ import annotations

from typing import Any

from ..types import ErrorInfo, ToolResult

__all__ = ["content_items", "tool_result"]

_KNOWN_KEYS = {
    "text": ("text",),
    "image": ("mimeType", "data"),
    "audio": ("mimeType", "data"),
    "resource_link": ("uri", "name", "title", "description", "mimeType", "size"),
}


def tool_result(result: Any) -> ToolResult:
    """Map one ``CallToolResult`` object to a :class:`ToolResult` (never raises)."""
    try:
        return _map(result)
    except Exception as exc:  # a result shaped in a way nobody foresaw must not break the chat
        return _invalid(f"{type(exc).__name__}: {exc}")


def _map(result: Any) -> ToolResult:
    if not isinstance(result, dict):
        return _invalid(f"the result is a JSON {type(result).__name__}, not an object")
    raw_content = result.get("content", [])
    if not isinstance(raw_content, list):
        return _invalid("its 'content' is not a list")
    items = content_items(raw_content)
    structured = result.get("structuredContent")
    if result.get("isError") is True:
        texts = [i["text"] for i in items if i.get("type") == "text" and i.get("text")]
        message = "\n".join(texts) or "the tool reported an error"
        return ToolResult(
            ok=False,
            error=ErrorInfo(message, "TOOL_EXECUTION_FAILED", {"content": items}),
        )
    if structured is not None:
        return ToolResult(ok=True, data=structured)
    if len(items) == 1 and items[0].get("type") == "text":
        return ToolResult(ok=True, data=items[0].get("text", ""))
    return ToolResult(ok=True, data=items)


def content_items(raw: list[Any]) -> list[dict[str, Any]]:
    """Content items as plain dicts in the documented shapes (never raises for list input)."""
    out: list[dict[str, Any]] = []
    for item in raw:
        if not isinstance(item, dict):
            out.append({"type": "unknown", "value": item})
            continue
        kind = item.get("type")
        if kind == "resource":
            out.append(_resource(item.get("resource")))
        elif isinstance(kind, str) and kind in _KNOWN_KEYS:
            mapped = {"type": kind}
            mapped.update({k: item[k] for k in _KNOWN_KEYS[kind] if k in item})
            if kind == "text" and not isinstance(mapped.get("text"), str):
                mapped["text"] = "" if mapped.get("text") is None else str(mapped["text"])
            out.append(mapped)
        else:
            out.append(dict(item))
    return out


def _resource(resource: Any) -> dict[str, Any]:
    if not isinstance(resource, dict):
        return {"type": "resource", "resource": resource}
    mapped: dict[str, Any] = {"type": "resource"}
    for key in ("uri", "mimeType", "text", "blob"):
        if key in resource:
            mapped[key] = resource[key]
    return mapped


def _invalid(why: str) -> ToolResult:
    return ToolResult(
        ok=False,
        error=ErrorInfo(
            f"the MCP server sent an invalid tool result: {why}", "TOOL_RESULT_INVALID"
        ),
    )
