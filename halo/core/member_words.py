"""A member named in a person's words: by id or name, any case, or by what children call a parent
("remind mum …" means the parent called Mom). Shared by reminders and lists, which name people
the same way."""

from __future__ import annotations

from config.family import Family, Member

# what children call a parent: "remind mum" means the parent called Mom (or Mommy, Mama …)
PARENT_WORDS: tuple[frozenset[str], ...] = (
    frozenset({"mom", "mum", "mommy", "mummy", "momma", "mama", "mam", "mother", "ma"}),
    frozenset({"dad", "daddy", "papa", "pa", "father", "da", "pop", "pops"}),
)


def find_member(family: Family, word: str) -> Member | None:
    """A member by id or name, any case; a word for a mother or father is the one parent whose id
    or name is such a word ("mum" finds a parent called Mom)."""
    word = word.strip().lower().removesuffix("'s")
    found = next((m for m in family.members if word in (m.id, m.name.lower())), None)
    if found is not None:
        return found
    kind = next((words for words in PARENT_WORDS if word in words), None)
    if kind is None:
        return None
    parents = [p for p in family.parents if p.id in kind or p.name.lower() in kind]
    return parents[0] if len(parents) == 1 else None
