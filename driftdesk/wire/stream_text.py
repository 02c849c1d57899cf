"""Where a stream's events carry text the model wrote, per protocol: Chat Completions deltas
(per choice), Responses ``*.delta`` events (per item, output, content and summary index),
Messages ``content_block`` starts and deltas (per block). A field's text is joined across
events by the client; these say which field each piece belongs to (``where``), when a field is
complete, and when the stream is over. The key scrubber (``reruns/key_scrub.py``) follows
them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from driftdesk.wire import RESPONSES_ENDS

# Fields of a delta that are no text the model wrote.
NOT_TEXT = frozenset({"type", "role", "signature", "index", "id"})
_RESPONSES_WHERE = ("item_id", "output_index", "content_index", "summary_index")


class TextPlace(NamedTuple):
    """One step of reading an event's text, in order:

    - ``walk``: every text field in ``holder`` (at any depth; a dict in a list known by its
      ``index``, see ``list_index``) is a piece of the field ``(*where, name, ...)``;
    - ``piece``: ``holder[key]`` is a piece of the field ``where``;
    - ``final``: the fields under ``where`` are complete;
    - ``end``: the stream's answer is over (every field complete)."""

    kind: str
    where: tuple[Any, ...] = ()
    holder: dict[str, Any] | None = None
    key: str = ""


def text_places(event: dict[str, Any]) -> Iterator[TextPlace]:
    """The text steps of one event of any of the three protocols (none for other events)."""
    kind = event.get("type")
    choices = event.get("choices")
    where: tuple[Any, ...]
    if isinstance(choices, list):  # Chat Completions
        for position, choice in enumerate(choices):
            if not isinstance(choice, dict):
                continue
            where = ("chat", list_index(choice, position))
            delta = choice.get("delta")
            if isinstance(delta, dict):
                yield TextPlace("walk", where, delta)
            if choice.get("finish_reason"):
                yield TextPlace("final", where)
    elif not isinstance(kind, str):
        return
    elif kind.startswith("response."):  # Responses
        if kind.endswith(".delta") and isinstance(event.get("delta"), str):
            where = ("responses", kind[:-6], *(event.get(k) for k in _RESPONSES_WHERE))
            yield TextPlace("piece", where, event, "delta")
        elif kind.endswith(".done"):
            yield TextPlace(
                "final", ("responses", kind[:-5], *(event.get(k) for k in _RESPONSES_WHERE))
            )
        elif kind in RESPONSES_ENDS:
            yield TextPlace("end")
    elif kind == "content_block_delta":  # Messages
        delta = event.get("delta")
        if isinstance(delta, dict):
            yield TextPlace("walk", ("messages", event.get("index")), delta)
    elif kind == "content_block_start":
        block = event.get("content_block")
        if isinstance(block, dict):
            yield TextPlace("walk", ("messages", event.get("index")), block)
    elif kind == "content_block_stop":
        yield TextPlace("final", ("messages", event.get("index")))
    elif kind == "message_stop":
        yield TextPlace("end")


def list_index(entry: dict[str, Any], position: int) -> Any:
    """What names a dict in a list of a delta (a tool call): its ``index``, else its place."""
    index = entry.get("index", position)
    return index if isinstance(index, (int, str)) else position
