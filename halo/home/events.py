"""Home events → messages: the home rules, decided in code, with no model anywhere.

`HomeEvents` is the `Observations` sink the MQTT adapter is given. For each observation it
stores it, updates the entity's state, and asks every rule whose topic matches:

- a state (a sensor, a door) fires on a change into the condition, never on a repeat of it
  (Zigbee2MQTT republishes the whole state on every battery tick); with `for_minutes` it
  must hold that long, and changing back cancels it;
- an event (a Frigate object, an OwnTracks transition) fires once per event id, whatever
  updates and redeliveries follow;
- a retained message replayed at connect updates what is known and never fires.

A fired rule then goes through cooldown, the burst limit, the policy (`receive_proactive`,
per recipient scope), mute and quiet hours; what may go out now goes through `Delivery`,
the rest waits in the queue in halo.db. `tick()` fires held conditions and releases the
queue; a background task calls it, tests call it with their own clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from config.family import Family
from config.home import HomeRule, HomeSettings, QuietHours
from halo.core.envelope import Scope
from halo.core.scopes import UnknownScopeError, member_scopes, resolve_scope
from halo.family.direct import DirectMessages
from halo.home.rules import condition_holds, render, topic_matches
from halo.home.send import send_home_message
from halo.home.store import HomeStore, Queued
from halo.outbound.asks import PARENTS, Asks
from halo.outbound.delivery import Delivery
from halo.port import Observation
from policy import SYSTEM, PolicyEngine
from transcripts import AuditLog

log = logging.getLogger(__name__)

TICK_SECONDS = 5.0
MAX_REPORT_LINES = 20
SENDING = "sending"
MAX_BATCH = 200  # observations stored and judged in one transaction (one fsync)


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A message decided on inside a transaction, sent once it is committed."""

    rule_id: str
    entity: str
    scope_id: str
    text: str


@dataclass(slots=True)
class RuleReport:
    """What a rule last did and why, for `GET /home/rules`."""

    last_fired_at: datetime | None = None
    fired: int = 0
    last_outcome: str | None = None
    last_outcome_at: datetime | None = None
    deliveries: dict[str, str] = field(default_factory=dict)  # scope id → sent / queued / refused …

    def note(self, outcome: str, at: datetime) -> None:
        self.last_outcome, self.last_outcome_at = outcome, at

    def as_json(self) -> dict[str, Any]:
        return {
            "lastFiredAt": _iso(self.last_fired_at),
            "fired": self.fired,
            "lastOutcome": self.last_outcome,
            "lastOutcomeAt": _iso(self.last_outcome_at),
            "deliveries": dict(self.deliveries),
        }


class HomeEvents:
    def __init__(
        self,
        settings: HomeSettings,
        family: Callable[[], Family],
        store: HomeStore,
        policy: PolicyEngine,
        delivery: Delivery,
        direct: DirectMessages,
        audit: AuditLog,
        *,
        now: Callable[[], datetime] | None = None,
        asks: Asks | None = None,
    ) -> None:
        self.asks = asks  # a home message carries a "mute 2 h" button
        self.settings = settings
        self.family = family
        self.store = store
        self.policy = policy
        self.delivery = delivery
        self.direct = direct
        self.audit = audit
        self.now = now or (lambda: datetime.now(UTC))
        self.rules = list(settings.rules)
        self.reports: dict[str, RuleReport] = {r.id: RuleReport() for r in self.rules}
        self.observed = 0
        self._lock = asyncio.Lock()  # one observation or tick at a time: rule state is read-modify-write
        self._recent: dict[str, deque[float]] = {r.id: deque() for r in self.rules}
        self._task: asyncio.Task[None] | None = None
        self._pending: list[tuple[Observation, asyncio.Future[None]]] = []
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None

    # --- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        await self.recall_last_fired()
        self._task = asyncio.create_task(self._tick_forever(), name="home-events")

    async def recall_last_fired(self) -> None:
        """When each rule last fired, from halo.db: what a start knows of the runs before it (the
        counts and outcomes are this run's, so the dashboard says which is which)."""
        for rule_id, at in (await self.store.last_fired()).items():
            if rule_id in self.reports:
                self.reports[rule_id].last_fired_at = datetime.fromtimestamp(at, UTC)

    async def apply(self, settings: HomeSettings) -> None:
        """halo.yaml's `home:` section changed (halo/workspace/config_reload.py): new rules and quiet
        hours from the next observation on. What a kept rule saw, fired and queued stays."""
        async with self._lock:
            self.settings = settings
            self.store.keep = settings.keep_observations
            self.rules = list(settings.rules)
            self.reports = {r.id: self.reports.get(r.id) or RuleReport() for r in self.rules}
            self._recent = {r.id: self._recent.get(r.id) or deque() for r in self.rules}

    async def stop(self) -> None:
        for task in (self._task, self._worker):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._worker = None

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            try:
                await self.tick()
            except Exception:
                log.exception("home events: a tick failed; trying again shortly")

    # --- the sink ----------------------------------------------------------------------

    async def observe(self, observation: Observation) -> None:
        """Returns once the observation is stored and every rule has judged it. Observations
        that arrive together are stored and judged in one transaction, in arrival order."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((observation, done))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._work(), name="home-observations")
        self._wake.set()
        await done

    async def _work(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                try:
                    await self._judge([obs for obs, _ in batch])
                    results: list[BaseException | None] = [None] * len(batch)
                except Exception:  # one bad observation must not cost the others: one by one
                    results = []
                    for obs, _ in batch:
                        try:
                            await self._judge([obs])
                            results.append(None)
                        except Exception as exc:
                            results.append(exc)
                for (_, done), error in zip(batch, results, strict=True):
                    if not done.done():
                        done.set_exception(error) if error else done.set_result(None)

    async def _judge(self, batch: list[Observation]) -> None:
        async with self._lock:
            outgoing: list[Outgoing] = []
            async with self.store.transaction():
                for observation in batch:
                    now = self.now()
                    await self.store.record(observation, now.timestamp())
                    for rule in self.rules:
                        if topic_matches(rule.when.topic, observation.topic):
                            await self._consider(rule, observation, now, outgoing)
            await self._deliver(outgoing)
            self.observed += len(batch)

    async def _consider(self, rule: HomeRule, obs: Observation, now: datetime, outgoing: list[Outgoing]) -> None:
        report = self.reports[rule.id]
        holds = condition_holds(rule.when, obs.payload)
        if obs.event_id is not None:  # an event: once per id
            if not holds:
                report.note(f"{obs.entity}: {rule.when.field} does not match", now)
            elif obs.retained:
                report.note(f"{obs.entity}: replayed retained event, not announced", now)
            elif not await self.store.first_time(rule.id, obs.event_id, now.timestamp()):
                report.note(f"{obs.entity}: {obs.event_id} was already announced", now)
            else:
                await self._fire(rule, obs.entity, obs.topic, obs.payload, now, outgoing)
            return
        before = await self.store.rule_memory(rule.id, obs.entity)
        if obs.retained:  # replayed at connect: know it, never say it
            await self.store.set_rule_memory(rule.id, obs.entity, matched=holds)
            report.note(f"{obs.entity}: retained state replayed, not announced", now)
        elif holds and not before.matched:
            if rule.when.for_minutes:
                due = now + timedelta(minutes=rule.when.for_minutes)
                await self.store.set_rule_memory(
                    rule.id,
                    obs.entity,
                    matched=True,
                    hold_due=due.timestamp(),
                    hold_topic=obs.topic,
                    hold_payload=_json(obs.payload),
                )
                report.note(f"{obs.entity}: condition met, waiting {rule.when.for_minutes:g} min", now)
            else:
                await self.store.set_rule_memory(rule.id, obs.entity, matched=True)
                await self._fire(rule, obs.entity, obs.topic, obs.payload, now, outgoing)
        elif not holds and before.matched:
            cancelled = before.hold_due is not None
            await self.store.set_rule_memory(rule.id, obs.entity, matched=False, hold_due=None, hold_payload=None)
            report.note(f"{obs.entity}: changed back" + (", held message cancelled" if cancelled else ""), now)
        elif holds:
            report.note(f"{obs.entity}: still {rule.when.field} as before: a repeat, not a change", now)
        else:
            report.note(f"{obs.entity}: {rule.when.field} does not match", now)

    # --- firing ------------------------------------------------------------------------

    async def _fire(
        self,
        rule: HomeRule,
        entity: str,
        topic: str,
        payload: dict[str, Any],
        now: datetime,
        outgoing: list[Outgoing],
    ) -> None:
        report = self.reports[rule.id]
        memory = await self.store.rule_memory(rule.id, entity)
        if rule.cooldown_minutes and memory.last_fired is not None:
            ready = memory.last_fired + rule.cooldown_minutes * 60
            if now.timestamp() < ready:
                report.note(f"{entity}: in cooldown until {_iso(datetime.fromtimestamp(ready, UTC))}", now)
                return
        await self.store.set_rule_memory(rule.id, entity, last_fired=now.timestamp())
        report.fired += 1
        report.last_fired_at = now
        text = render(rule.say, payload, entity=entity, topic=topic)
        burst_until = await self._burst(rule, now)
        outcomes = {}
        for scope, named in self._recipients(rule):
            outcomes[scope.id] = await self._to_scope(rule, scope, named, text, now, burst_until)
            if outcomes[scope.id] == SENDING:
                outgoing.append(Outgoing(rule.id, entity, scope.id, text))
        report.deliveries = outcomes
        summary = ", ".join(f"{k}: {v}" for k, v in outcomes.items()) or "no recipient scope"
        report.note(f"{entity}: fired → {summary}", now)
        self.audit.write("home_rule_fired", rule=rule.id, entity=entity, topic=topic, deliveries=outcomes)

    async def _burst(self, rule: HomeRule, now: datetime) -> float | None:
        """When this firing is part of a burst, the time the burst's summary goes out. A summary
        still collecting in halo.db takes it too: the count of recent firings is this run's, so
        after a restart in the middle of a burst the rest still joins the summary."""
        window = self.settings.burst_minutes * 60
        recent = self._recent.setdefault(rule.id, deque())
        stamp = now.timestamp()
        while recent and recent[0] <= stamp - window:
            recent.popleft()
        recent.append(stamp)
        collecting = await self.store.burst_release(rule.id)
        if collecting is not None:
            return collecting
        if len(recent) <= self.settings.burst_limit:
            return None
        return stamp + window

    def _recipients(self, rule: HomeRule) -> list[tuple[Scope, bool]]:
        """The scopes a rule names, each with whether the rule names its owner explicitly
        (only then may a child's DM receive it; the policy decides). A member, and each parent
        for `parents`, is reached where they get direct messages (halo/family/direct.py)."""
        family = self.family()
        found: dict[str, tuple[Scope, bool]] = {}

        def dm_of(member_id: str, named: bool) -> None:
            scope = self.direct.scope_of(member_id)
            if scope is None:
                log.warning("home rule %s: %r is not a member", rule.id, member_id)
            else:
                found.setdefault(scope.id, (scope, named))

        for target in rule.to:
            if target == "parents":
                for parent in family.parents:
                    dm_of(parent.id, False)
            elif target in ("parents_group", "family_group"):
                for scope in member_scopes(family):
                    if scope.type == target:
                        found.setdefault(scope.id, (scope, False))
            elif ":" in target:
                try:
                    found.setdefault(target, (resolve_scope(family, target), False))
                except UnknownScopeError as exc:
                    log.warning("home rule %s: %s", rule.id, exc)
            else:
                dm_of(target, True)
        return list(found.values())

    async def _to_scope(
        self, rule: HomeRule, scope: Scope, named: bool, text: str, now: datetime, burst_until: float | None
    ) -> str:
        decision = self.policy.decide(
            "receive_proactive", principal=SYSTEM, resource=scope, context={"rule_allows_children": named}
        )
        if not decision.allowed:
            return f"refused by policy ({', '.join(decision.policy_ids) or 'no permit'})"
        if not rule.urgent and scope.type == "dm" and scope.owner_id:
            until = await self.store.muted_until(scope.owner_id)
            if until is not None and now.timestamp() < until:
                self.audit.write("home_message_muted", rule=rule.id, scope_id=scope.id)
                return "muted"
        if burst_until is not None:
            await self.store.enqueue(scope.id, text, rule.id, "burst", now.timestamp(), burst_until)
            return "in burst summary"
        quiet_end = None if rule.urgent else self.quiet_until(scope, now)
        if quiet_end is not None:
            await self.store.enqueue(scope.id, text, rule.id, "quiet", now.timestamp(), quiet_end.timestamp())
            return f"queued until {_iso(quiet_end)}"
        return SENDING

    async def _deliver(self, outgoing: list[Outgoing]) -> None:
        """Send what the committed transaction decided, and say how it went in the reports."""
        for message in outgoing:
            outcome = await self._send(message.scope_id, message.text, rule=message.rule_id)
            report = self.reports[message.rule_id]
            report.deliveries[message.scope_id] = outcome
            summary = ", ".join(f"{k}: {v}" for k, v in report.deliveries.items())
            report.last_outcome = f"{message.entity}: fired → {summary}"

    async def _send(self, scope_id: str, text: str, **audit: Any) -> str:
        """Never raises: what the rules decided is committed, and one failed send must not
        cost the others (a queued message stays queued and is tried again on the next tick)."""
        try:
            scope = resolve_scope(self.family(), scope_id)
            who = scope.owner_id if scope.type == "dm" else PARENTS
            reached = await send_home_message(self.delivery, scope_id, text, self.asks, who)
        except Exception as exc:
            log.exception("home message to %s failed", scope_id)
            self.audit.write("home_message_failed", scope_id=scope_id, error=type(exc).__name__, **audit)
            return f"failed ({type(exc).__name__})"
        if not reached:
            self.audit.write("home_message_unreachable", scope_id=scope_id, **audit)
            return "unreachable (no adapter)"
        self.audit.write("home_message", scope_id=scope_id, text=text, **audit)
        return "sent"

    # --- quiet hours ------------------------------------------------------------------

    def quiet_hours_for(self, scope: Scope) -> QuietHours | None:
        if scope.type == "dm" and scope.owner_id in self.settings.member_quiet_hours:
            return self.settings.member_quiet_hours[scope.owner_id]
        return self.settings.quiet_hours

    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.family().family.timezone)

    def quiet_until(self, scope: Scope, now: datetime) -> datetime | None:
        """When quiet hours end for this scope, if they are on now (None: not quiet)."""
        hours = self.quiet_hours_for(scope)
        if hours is None:
            return None
        local = now.astimezone(self.zone())
        if not hours.contains(local.time()):
            return None
        end = local.replace(hour=hours.end.hour, minute=hours.end.minute, second=0, microsecond=0)
        if end <= local:
            end += timedelta(days=1)
        return end.astimezone(UTC)

    # --- the clock ---------------------------------------------------------------------

    async def tick(self) -> None:
        """Fire conditions held long enough, and release queued messages whose time came."""
        async with self._lock:
            now = self.now()
            outgoing: list[Outgoing] = []
            async with self.store.transaction():
                for hold in await self.store.due_holds(now.timestamp()):
                    await self.store.set_rule_memory(hold.rule_id, hold.entity, hold_due=None, hold_payload=None)
                    rule = next((r for r in self.rules if r.id == hold.rule_id), None)
                    if rule is not None:
                        await self._fire(rule, hold.entity, hold.topic, hold.payload, now, outgoing)
            await self._deliver(outgoing)
            for scope_id, waiting in (await self.store.due(now.timestamp())).items():
                outcome = await self._send(scope_id, merged(waiting), rules=sorted({q.rule_id for q in waiting}))
                if outcome == "sent":
                    await self.store.dequeue([q.id for q in waiting])

    # --- for /home and the admin API ---------------------------------------------------

    def rules_report(self) -> list[dict[str, Any]]:
        return [
            {"id": r.id, **r.model_dump(mode="json", by_alias=True, exclude={"id"}), **self.reports[r.id].as_json()}
            for r in self.rules
        ]

    async def watched_states(self) -> list[dict[str, Any]]:
        """The current state of every entity some rule watches."""
        return [
            s for s in await self.store.states() if any(topic_matches(r.when.topic, s["topic"]) for r in self.rules)
        ]

    def status(self) -> dict[str, Any]:
        return {"rules": len(self.rules), "observed": self.observed}


def merged(waiting: list[Queued]) -> str:
    """Several held messages for one recipient → one message (repeats counted, not repeated)."""
    if len(waiting) == 1:
        return waiting[0].text
    counts: dict[str, int] = {}
    for q in waiting:
        counts[q.text] = counts.get(q.text, 0) + 1
    lines = [f"• {text}" + (f" (×{n})" if n > 1 else "") for text, n in counts.items()]
    if len(lines) > MAX_REPORT_LINES:
        lines = [*lines[:MAX_REPORT_LINES], f"• … and {len(lines) - MAX_REPORT_LINES} more"]
    bursting = any(q.reason == "burst" for q in waiting)
    head = (
        f"Home: {len(waiting)} events in a short time:" if bursting else f"Home, while it was quiet ({len(waiting)}):"
    )
    return "\n".join([head, *lines])


def _json(value: Any) -> str:
    import json

    return json.dumps(value, default=str)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
