"""First start: a commented halo.yaml with one parent (the local owner) and a default SOUL.md."""

from __future__ import annotations

import getpass
import re
from pathlib import Path

from config.family import Member
from halo.context.builder import DEFAULT_SOUL
from memory.store import SOUL, MemoryStore, user_md

STARTER = """\
# halo — family and runtime config. Docs: README.md. Every setting can be overridden
# from the environment: HALO_LLM__PROVIDER=openai, HALO_ADMIN__PORT=8788, …

family:
  name: {family_name}

# Everyone halo knows. role: parent | child | colleague. Children get an age_group
# (young_child | adolescent) and, for adolescents, parental_visibility (true | false).
# Platform ids link a person to their accounts; web_token lets them use the web chat
# from another device (Authorization: Bearer <token>).
members:
  - id: {owner_id}
    name: {owner_name}
    role: parent
    # telegram_user_id: 1001
    # web_token: change-me-to-a-long-random-string
#  - {{id: aarav, name: Aarav, role: child, age_group: adolescent, parental_visibility: false, telegram_user_id: 1003}}
# Children's limits (reply length, blocked topics, tools, when parents are told) have
# safe defaults per age group; change them under `safety: profiles:` (see README.md).

owner: {owner_id}   # the local owner: web chat from this machine and `halo chat` speak as them

parents_group:
  telegram_chat_id: null    # a group is untrusted until its chat id is set here

llm:
  provider: none            # openai | openai-compatible | anthropic | none
  model: gpt-4.1-mini
  # base_url: http://127.0.0.1:11434/v1   # openai-compatible servers (Ollama, vLLM, OpenRouter)
  # api_key: …                            # or HALO_LLM__API_KEY / OPENAI_API_KEY / ANTHROPIC_API_KEY

memory:
  distillation_enabled: true      # facts and notes from conversations, by rules (no model)
  distillation_every_n_items: 20
  extractor: deterministic        # llm: also learn from quiet chats with llm.cheap_model

telegram:
  token: null               # from @BotFather; see "Telegram" in README.md

admin:
  host: 127.0.0.1
  port: 8787
  token: null               # required when host is not a loopback address
"""


def _slug(name: str) -> str:
    slug = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_")
    return slug[:32] or "owner"


def write_starter_config(path: Path) -> bool:
    """Write the starter config if there is none. Returns True when it was written."""
    if path.exists():
        return False
    try:
        user = getpass.getuser()
    except OSError:
        user = "owner"
    owner_id = _slug(user)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        STARTER.format(family_name="My family", owner_id=owner_id, owner_name=user.capitalize()),
        encoding="utf-8",
    )
    return True


def write_default_soul(memory: MemoryStore) -> bool:
    """SOUL.md when there is none (on PostgreSQL only by the process serving the family)."""
    if not memory.holds(SOUL) or memory.text(SOUL) is not None:
        return False
    memory.write(SOUL, DEFAULT_SOUL)
    return True


USER_TEMPLATE = """# {name}

<!-- What halo knows about {name} ({role}). halo reads this file into its context when the
policy allows it; it never writes here, so it holds only what you put in. One fact a line,
e.g. "- Loves dinosaurs", "- Allergic to peanuts". -->
"""


def write_default_user_files(memory: MemoryStore, members: list[Member]) -> int:
    """members/<id>/USER.md for each member who has none yet; returns how many were written
    (on PostgreSQL only by the process serving the family)."""
    written = 0
    for member in members:
        path = user_md(member.id)
        if not memory.holds(path) or memory.text(path) is not None:
            continue
        memory.write(path, USER_TEMPLATE.format(name=member.name, role=member.role))
        written += 1
    return written
