"""A stand-in model for Graphiti's structured requests, plugged into `FakeOpenAI` as an interceptor.

Graphiti asks for JSON by schema name (`response_format.json_schema.name`). This stand-in
answers each kind by reading the prompt it was sent, the way a small model would, for one
sentence shape that halo's episodes carry: `<Subject>'s <thing>: <value>` (a keyed fact,
e.g. "Aarav's football: Thursdays") or `<Subject>'s <thing> is (on) <value>`.

- entity extraction: the speaker first, then each subject and thing;
- edge extraction: subject → thing, the fact "<Subject>'s <thing>: <value>", valid from the
  episode's time;
- edge dedupe: the same subject and thing with another value contradicts the old fact;
  the same fact is a duplicate;
- node resolution: a candidate with the same name (case-insensitive);
- timestamps and summaries: the reference time, no summaries.

`fail_after` makes the stand-in answer HTTP 500 from the n-th call on (a model outage in the
middle of an episode); `calls` counts what it answered, by schema name.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from typing import Any

from tests.fakes.llm_server import FakeOpenAI, Reply

_LINE = re.compile(r"^(?:\[(?P<when>[^\]]+)\]\s*)?(?P<speaker>[A-Z][\w-]*)(?: \([^)]*\))?:\s*(?P<text>.+)$")
_FACT = re.compile(
    r"(?P<subject>[A-Z][\w-]*)['’]s (?P<thing>[a-z][a-z ]*?)(?::\s*| (?:is|are) (?:now )?(?:on )?)(?P<value>[^.;,\n]+)"
)
_NOW_WORDS = re.compile(r"\b(?:now|from now on)\b", re.I)


def _section(prompt: str, name: str) -> str:
    found = re.search(rf"<{name}>\s*(.*?)\s*</{name}>", prompt, re.S)
    return found.group(1) if found else ""


def _facts(message: str) -> list[tuple[str, str, str, str]]:
    """(speaker, subject, thing, value) for every fact sentence of a message."""
    found = []
    for raw in message.splitlines():
        line = _LINE.match(raw.strip().strip('"'))
        if line is None:
            continue
        for fact in _FACT.finditer(line.group("text")):
            value = _NOW_WORDS.sub("", fact.group("value")).strip(" ,")
            found.append((line.group("speaker"), fact.group("subject"), fact.group("thing").strip(), value))
    return found


def _speakers(message: str) -> list[str]:
    names = []
    for raw in message.splitlines():
        line = _LINE.match(raw.strip().strip('"'))
        if line and line.group("speaker") not in names:
            names.append(line.group("speaker"))
    return names


def fact_text(subject: str, thing: str, value: str) -> str:
    return f"{subject}'s {thing}: {value}"


class GraphitiStandIn:
    """The interceptor: answers Graphiti's requests, leaves every other request to the script."""

    def __init__(self, *, fail_after: int | None = None) -> None:
        self.fail_after = fail_after
        self.calls: Counter[str] = Counter()
        self.prompts: list[tuple[str, str]] = []  # (schema name, prompt text) for reading

    def install(self, server: FakeOpenAI) -> GraphitiStandIn:
        server.interceptors.append(self)
        return self

    def __call__(self, body: dict[str, Any]) -> Reply | str | None:
        fmt = body.get("response_format") or {}
        name = (fmt.get("json_schema") or {}).get("name")
        if name is None and fmt.get("type") != "json_object":
            return None
        prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        name = name or "json_object"
        if self.fail_after is not None and sum(self.calls.values()) >= self.fail_after:
            return Reply(status=500, error_message="stand-in model outage")
        self.calls[name] += 1
        self.prompts.append((name, prompt))
        return json.dumps(self._answer(name, prompt))

    def _answer(self, name: str, prompt: str) -> dict[str, Any]:
        if name == "ExtractedEntities":
            return {"extracted_entities": [{"name": n, "entity_type_id": 0} for n in self._entities(prompt)]}
        if name == "ExtractedEdges":
            return {"edges": self._edges(prompt)}
        if name == "EdgeDuplicate":
            return self._dedupe_edge(prompt)
        if name == "NodeResolutions":
            return {"entity_resolutions": self._resolve_nodes(prompt)}
        if name == "EdgeTimestamps":
            return {"valid_at": None, "invalid_at": None}
        if name == "SummarizedEntities":
            return {"summaries": []}
        if name == "EntitySummary":
            return {"summary": ""}
        return {}

    @staticmethod
    def _entities(prompt: str) -> list[str]:
        message = _section(prompt, "CURRENT MESSAGE")
        names = _speakers(message)
        for _, subject, thing, _ in _facts(message):
            for name in (subject, thing):
                if name not in names:
                    names.append(name)
        return names

    @staticmethod
    def _edges(prompt: str) -> list[dict[str, Any]]:
        message = _section(prompt, "CURRENT_MESSAGE")
        entities = {e["name"] for e in json.loads(_section(prompt, "ENTITIES") or "[]")}
        edges = []
        for raw in message.splitlines():
            line = _LINE.match(raw.strip().strip('"'))
            if line is None:
                continue
            when = _iso(line.group("when")) or _iso(_section(prompt, "REFERENCE_TIME").split("  #")[0])
            for _, subject, thing, value in _facts(raw.strip()):
                if subject in entities and thing in entities:
                    edges.append(
                        {
                            "source_entity_name": subject,
                            "target_entity_name": thing,
                            "relation_type": re.sub(r"\W+", "_", f"has {thing} schedule").upper(),
                            "fact": fact_text(subject, thing, value),
                            "valid_at": when,
                            "invalid_at": None,
                        }
                    )
        return edges

    @staticmethod
    def _dedupe_edge(prompt: str) -> dict[str, Any]:
        new = _section(prompt, "NEW FACT")
        new_fact = _fact_of(new)
        duplicates, contradicted = [], []
        candidates = _listed_facts(_section(prompt, "EXISTING FACTS"))
        invalidation = _listed_facts(_section(prompt, "FACT INVALIDATION CANDIDATES"))
        for idx, fact in candidates + invalidation:
            if new_fact is None:
                continue
            if fact == new_fact:
                if (idx, fact) in candidates:
                    duplicates.append(idx)
            elif fact.split(":")[0] == new_fact.split(":")[0]:
                contradicted.append(idx)
        return {"duplicate_facts": duplicates, "contradicted_facts": contradicted}

    @staticmethod
    def _resolve_nodes(prompt: str) -> list[dict[str, Any]]:
        entities = json.loads(_section(prompt, "ENTITIES") or "[]")
        existing = json.loads(_section(prompt, "EXISTING ENTITIES") or "[]")
        resolutions = []
        for entity in entities:
            match = next(
                (c["candidate_id"] for c in existing if c.get("name", "").casefold() == entity["name"].casefold()),
                -1,
            )
            resolutions.append({"id": entity["id"], "name": entity["name"], "duplicate_candidate_id": match})
        return resolutions


def _fact_of(text: str) -> str | None:
    try:
        data = json.loads(text)
    except ValueError:
        data = text
    fact = data.get("fact") if isinstance(data, dict) else str(data)
    return fact.strip() if fact else None


def _listed_facts(text: str) -> list[tuple[int, str]]:
    items = ast.literal_eval(text or "[]")  # Graphiti formats these lists with Python's repr
    return [(int(item["idx"]), str(item["fact"]).strip()) for item in items if "idx" in item]


def _iso(text: str | None) -> str | None:
    """A time as Graphiti wants it (ISO 8601, Z), from what the prompt shows."""
    if not text:
        return None
    text = text.strip()
    match = re.match(r"(\d{4}-\d{2}-\d{2})(?:[ T](\d{2}:\d{2})(?::\d{2})?)?", text)
    if match is None:
        return None
    return f"{match.group(1)}T{match.group(2) or '00:00'}:00Z"
