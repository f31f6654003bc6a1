"""Passing a message to another family member: consequential, so a parent approves it first
(halo/tools/approvals.py). The tool checks the policy and the recipient, then files the request;
the message goes out only on a parent's "yes", worded exactly as the parent saw it."""

from __future__ import annotations

from collections.abc import Callable

from agents import FunctionTool, RunContextWrapper

from config.family import Family, Member
from halo.core.turn import TurnRun
from halo.outbound.delivery import Delivery
from halo.tools.approvals import Approvals, Pending
from halo.tools.guarded import guarded_tool

MAX_MESSAGE_CHARS = 1000


def _find(family: Family, who: str) -> Member | None:
    wanted = who.strip().lower()
    return next((m for m in family.members if wanted in (m.id.lower(), m.name.lower())), None)


def message_tools(approvals: Approvals, delivery: Delivery, family: Callable[[], Family]) -> list[FunctionTool]:
    async def deliver(request: Pending) -> str:
        recipient = family().member(str(request.arguments.get("member")))
        asker = family().member(request.asked_by)
        if recipient is None:
            return "I could not pass the message on: that member is no longer in the family config."
        sender = asker.name if asker else request.asked_by
        reached = await delivery.to_member(recipient.id, f"Message from {sender}: {request.arguments['text']}")
        if not reached:
            return f"I could not pass the message on: {recipient.name} has no chat I can reach."
        return f"I passed the message on to {recipient.name}."

    approvals.actions["message_member"] = deliver

    @guarded_tool("outward")  # it reaches someone outside this conversation
    async def message_member(ctx: RunContextWrapper[TurnRun], member: str, text: str) -> str:
        """Pass a short message to another family member, in their own chat. A parent approves it
        first, so say that it will go out once approved.

        Args:
            member: the family member's name or id.
            text: the message, in the person's words.
        """
        turn = ctx.context.turn
        recipient = _find(turn.family, member)
        if recipient is None:
            names = ", ".join(m.name for m in turn.family.members if m.role != "colleague")
            return f"There is no family member called {member!r}. The family: {names}."
        if turn.member is not None and recipient.id == turn.member.id:
            return "That is the person you are talking to: answer them here instead."
        # one line, and no quote marks of halo's own: the words stay inside the quotes the parent sees
        text = " ".join(text.split()).replace("“", '"').replace("”", '"')
        if not text:
            return "The message is empty: ask what to say."
        if len(text) > MAX_MESSAGE_CHARS:
            return f"The message is too long (over {MAX_MESSAGE_CHARS} characters): ask for a shorter one."
        summary = f"send {recipient.name} this message: “{text}”"
        return await approvals.ask(turn, "message_member", {"member": recipient.id, "text": text}, summary)

    return [message_member]
