"""A small labelled recall set: a family's notes, and questions with the notes that answer them.

Three kinds of question, because each search half fails at one of them:
- paraphrase: no content word in common with the answer ("kid's teeth" → "orthodontist");
  full-text search cannot find these, vectors can;
- name: a rare exact name ("Okafor", "Lisbon"); a static model knows little of names,
  full-text search finds them at once;
- date: a day ("March 14"); only the daily note's date words carry it.

Documents are files: `<id>.md` for undated memory, `daily/<date>.md` for dated notes, so a
hit's source names the document.
"""

from __future__ import annotations

from pathlib import Path

DOCS: dict[str, str] = {
    "braces.md": "The orthodontist said Aarav needs braces before the summer; the molar X-ray looked fine.",
    "dentist.md": "Tara's dental checkup is with Dr. Patel; she must floss every night to avoid a cavity.",
    "soccer.md": "Aarav plays goalkeeper in the under-14 league; coach Diaz wants new cleats by the first match.",
    "piano.md": "Tara's piano teacher moved the recital; she practises scales twenty minutes before dinner.",
    "school.md": "Aarav's maths exam is on the last week of the semester; the principal sends grades by email.",
    "allergy.md": "Tara is allergic to peanuts: the EpiPen lives in the kitchen drawer and one goes to school.",
    "trip.md": "Summer holiday: flights to Lisbon booked for August 3, hotel near the beach in Cascais.",
    "passport.md": "Aarav's passport expires in October; renew it at the post office before any travel.",
    "car.md": "The van's brakes squeak; the mechanic at Okafor Garage can service it on a Saturday.",
    "tyres.md": "Winter tyres are stored in the garage loft; swap them when it gets below seven degrees.",
    "budget.md": "Monthly grocery budget is 600; pocket money is 10 a week for Aarav and 5 for Tara.",
    "insurance.md": "Home insurance renews in January with Harbor Mutual; the policy number is in the blue folder.",
    "vaccine.md": "Tara's flu vaccine is due in November at the Maple Street clinic with the pediatrician.",
    "birthday.md": "Mom's birthday party: chocolate cake from Rosa's bakery, balloons, presents hidden upstairs.",
    "dog.md": "Biscuit the puppy sees the vet for shots; walk him twice a day, kibble at 7 and 18.",
    "garden.md": "Plant tomatoes in May; the compost bin needs turning and the lawn watering in dry weeks.",
    "wifi.md": "The guest network is called Sharma-Guest; the router is behind the TV.",
    "grandma.md": "Grandma Leela visits every December and stays in the spare room; she prefers tea, not coffee.",
    "chores.md": "Chores rota: Aarav takes out the bins on Tuesday, Tara feeds the fish on weekends.",
    "recipes.md": "Friday dinner is vegetarian pasta; double the garlic, no mushrooms for Aarav.",
    "daily/2026-03-14.md": "Pi day at school: Aarav brought an apple pie; the science fair poster won second prize.",
    "daily/2026-04-02.md": "Called the plumber about the dripping bathroom tap; he comes Thursday morning.",
    "daily/2026-05-20.md": "Tara lost a front tooth at lunch; the tooth fairy owes her a coin.",
    "daily/2026-06-11.md": "Parent-teacher meeting: Aarav should read thirty minutes a day over summer.",
    "daily/2026-07-08.md": "Paid the electricity bill late; set up automatic payments from the joint account.",
    "daily/2026-08-25.md": "Back-to-school shopping: new backpack, calculator and gym shoes for Aarav.",
    "daily/2026-09-09.md": "Tara had a fever and a cough; kept her home and booked the doctor for tomorrow.",
    "daily/2026-10-31.md": "Halloween: Tara dressed as a pumpkin, Aarav as an astronaut; too much candy.",
}

# (kind, question, the documents that answer it)
QUERIES: list[tuple[str, str, set[str]]] = [
    ("paraphrase", "when does the kid get his teeth straightened", {"braces.md"}),
    ("paraphrase", "what should we do about Tara's teeth hygiene", {"dentist.md", "daily/2026-05-20.md"}),
    ("paraphrase", "which football boots does he need", {"soccer.md"}),
    ("paraphrase", "when is the music concert", {"piano.md"}),
    ("paraphrase", "how much money do the kids get", {"budget.md"}),
    ("paraphrase", "is Tara allergic to any food", {"allergy.md"}),
    ("paraphrase", "where are we going on vacation", {"trip.md"}),
    ("paraphrase", "who fixes the vehicle", {"car.md"}),
    ("paraphrase", "when does the little one get her shot", {"vaccine.md"}),
    ("paraphrase", "what did the doctor say when she was sick", {"daily/2026-09-09.md"}),
    ("paraphrase", "what cake for the celebration", {"birthday.md"}),
    ("paraphrase", "when should the seeds go in the ground", {"garden.md"}),
    ("name", "Okafor", {"car.md"}),
    ("name", "Harbor Mutual", {"insurance.md"}),
    ("name", "Lisbon", {"trip.md"}),
    ("name", "Dr. Patel", {"dentist.md"}),
    ("name", "Leela", {"grandma.md"}),
    ("name", "Sharma-Guest network password", {"wifi.md"}),
    ("name", "coach Diaz", {"soccer.md"}),
    ("date", "what happened on March 14", {"daily/2026-03-14.md"}),
    ("date", "notes from 2026-04-02", {"daily/2026-04-02.md"}),
    ("date", "what did we do on October 31", {"daily/2026-10-31.md"}),
    ("date", "June 11 meeting", {"daily/2026-06-11.md"}),
    ("date", "what happened on 2026-08-25", {"daily/2026-08-25.md"}),
]


def write_docs(scope_dir: Path) -> None:
    for name, text in DOCS.items():
        path = scope_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")


def all_text() -> list[str]:
    return [*DOCS.values(), *(q for _, q, _ in QUERIES)]


MODES = ("bm25", "vectors", "hybrid")


async def evaluate(semantic: object, scope_id: str, now: float, k: int = 5) -> dict[str, dict[str, float]]:
    """recall@k per mode and query kind (plus "all"), searching `scope_id` of a synced SemanticMemory."""
    import asyncio

    from memory.semantic.index import ScopeIndex
    from memory.semantic.search import search

    index = ScopeIndex(semantic.index_path(scope_id), scope_id)  # type: ignore[attr-defined]
    params = semantic.params(limit=k, min_score=0.0, now=now)  # type: ignore[attr-defined]
    totals: dict[str, dict[str, list[float]]] = {m: {} for m in MODES}
    try:
        for kind, question, relevant in QUERIES:
            vector = await semantic.query_vector(question)  # type: ignore[attr-defined]
            for mode in MODES:
                hits = await asyncio.to_thread(
                    search, [index], question, vector, params, text_only=mode == "bm25", vector_only=mode == "vectors"
                )
                found = {h.source for h in hits[:k]} & relevant
                score = len(found) / len(relevant)
                totals[mode].setdefault(kind, []).append(score)
                totals[mode].setdefault("all", []).append(score)
    finally:
        index.close()
    return {m: {kind: sum(v) / len(v) for kind, v in by_kind.items()} for m, by_kind in totals.items()}


def table(results: dict[str, dict[str, float]]) -> str:
    kinds = ["paraphrase", "name", "date", "all"]
    counts = {kind: sum(1 for q in QUERIES if q[0] == kind) for kind in kinds[:-1]} | {"all": len(QUERIES)}
    head = "| recall@5 | " + " | ".join(f"{k} ({counts[k]})" for k in kinds) + " |"
    rows = [head, "|" + " --- |" * (len(kinds) + 1)]
    for mode, by_kind in results.items():
        rows.append(f"| {mode} | " + " | ".join(f"{by_kind.get(k, 0.0):.2f}" for k in kinds) + " |")
    return "\n".join(rows)
