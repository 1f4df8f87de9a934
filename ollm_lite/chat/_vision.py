"""Images only for models that can read them: refused before anything is sent.

Where the server says what a model reads — llama.cpp's ``GET /props`` ``modalities.vision``,
Ollama's ``POST /api/show`` ``capabilities`` list — a prompt with images to a model without
vision is an :class:`~ollm_lite.errors.UnsupportedOperation` at once, instead of a request the
server rejects or, worse, an answer about a picture the model never saw that runs until the
answer limit. Where the server does not say (``vision`` unknown), the request goes out.
"""

from __future__ import annotations

import threading

from ..errors import OllmError, UnsupportedOperation
from ..providers.base import ProviderAdapter, call_with_cancel
from ..types import ImagePart, Message

__all__ = ["refuse_images_without_vision"]


def refuse_images_without_vision(
    adapter: ProviderAdapter, model: str, message: Message, cancel: threading.Event
) -> None:
    """Raise when ``message`` carries images and the server says ``model`` has no vision.

    Raises:
        UnsupportedOperation: ``UNSUPPORTED_OPERATION`` naming the model.
    """
    if not any(isinstance(part, ImagePart) for part in message.parts):
        return
    try:
        # may ask the server (llama.cpp: /props, Ollama: /api/show)
        vision = call_with_cancel(adapter, "model_capabilities", model, cancel=cancel).vision
    except (OllmError, AttributeError, NotImplementedError):
        return  # a custom adapter may not implement the optional method: unknown
    if vision is False:
        raise UnsupportedOperation(
            f"model {model!r} cannot read images (the server lists no vision for it): "
            "send the prompt without images, or use a vision model",
            provider=getattr(adapter, "name", None),
            model=model,
        )
