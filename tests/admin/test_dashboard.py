"""The dashboard in a real browser: Playwright driving Debian's Chromium (/usr/bin/chromium).

Playwright's own browser download does not work here, so the system Chromium is used; the
tests skip, saying why, only when it is not installed (`apt-get install chromium`).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from halo.web_auth import DashboardLogin
from tests.admin.conftest import ADMIN_TOKEN, SEEDED, AdminHarness
from tests.memory_files import memory_names
from tests.waiting import DEFAULT_WITHIN

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
SHOTS = os.environ.get("HALO_SCREENSHOTS")  # a folder to keep the screenshots in, to look at them

pytestmark = [
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="Debian's Chromium is not at /usr/bin/chromium (apt-get install -y chromium)"
    ),
    pytest.mark.slow,  # a real browser
]


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright, expect

    # a deadline for a hang, not a measure: Playwright's 5 s default failed a page load with both
    # cores busy (scripts/hog-suite)
    expect.set_options(timeout=DEFAULT_WITHIN * 1000)
    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        await chromium.close()


async def open_dashboard(browser: Any, url: str, viewport: dict[str, int]) -> tuple[Any, list[str]]:
    """A page on the dashboard, and a list that collects script errors and CSP violations."""
    page = await browser.new_page(viewport=viewport)
    page.set_default_timeout(DEFAULT_WITHIN * 1000)
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on("console", lambda msg: problems.append(f"console: {msg.text}") if msg.type == "error" else None)
    await page.goto(url)
    return page, problems


async def screenshot(page: Any, path: Path, viewport: dict[str, int]) -> None:
    """A full-page screenshot at `viewport`, checked: the page fits the width (no sideways
    scrolling on a phone) and the picture is a real one, not a blank page."""
    await page.set_viewport_size(viewport)
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= viewport["width"], f"{path.name}: the page is {width}px wide at {viewport['width']}px"
    picture = await page.screenshot(path=str(path), full_page=True)
    assert len(picture) > 10_000, f"{path.name} looks blank"
    if SHOTS:  # Playwright makes the folder
        await page.screenshot(path=os.path.join(SHOTS, path.name), full_page=True)


def login_link(harness: AdminHarness) -> str:
    """What `halo serve` prints (and `halo dashboard` prints again): a link that works once."""
    token = DashboardLogin(harness.services.paths.logins).issue_link_token()
    return f"{harness.local.base}/login?token={token}"


async def family_halo(admin: Any) -> tuple[AdminHarness, str]:
    """A seeded halo with one newcomer waiting to join; the code they were given."""
    harness = await admin()
    await harness.seed()
    await harness.seed("telegram:1003")
    return harness, await harness.stranger(5550001, "Cousin Meera", "meera")


async def test_a_parent_sees_the_family_and_approves_a_newcomer(admin, browser, tmp_path: Path):
    from playwright.async_api import expect

    harness, code = await family_halo(admin)
    services = harness.services
    # On the family computer without the link, the page holds nothing and asks to sign in.
    locked, _ = await open_dashboard(browser, harness.local.base + "/", DESKTOP)
    await expect(locked.locator("#signin")).to_be_visible()
    assert await locked.locator("[data-scope]").count() == 0
    link = login_link(harness)
    page, problems = await open_dashboard(browser, link, DESKTOP)
    assert page.url == harness.local.base + "/"  # the link was exchanged for the cookie
    await expect(page.locator("body[data-loaded=true]")).to_have_count(1)

    # The menu names every panel, Home included; the family's name as written; labels that read right.
    nav = page.locator("nav a")
    assert await nav.all_inner_texts() == [
        "Overview", "Chats", "Join requests", "Home", "Tasks", "Reminders", "Spend", "Children",
        "Who may do what", "Memory", "Events",
    ]  # fmt: skip
    for item in await nav.all():
        target = (await item.get_attribute("href") or "").lstrip("#")
        assert await page.locator(f"section#{target}").count() == 1, target
    await expect(page.locator("#family-name")).to_have_text("· Sharma")
    await expect(page.locator("#overview-tiles")).to_contain_text("Policy rules")

    # One date and time format, the family's zone: the same words halo writes in chats and /reminders.
    await same_times_as_halo(page, harness)

    # Scopes, with their counts.
    mom = page.locator(f'[data-scope="{SEEDED}"]')
    await expect(mom).to_be_visible()
    await expect(mom).to_contain_text("Mom's private chat")
    await expect(mom).to_contain_text("2 transcript lines")
    await expect(page.locator('[data-scope="telegram:-1001234"]')).to_contain_text("Parents group")
    await expect(page.locator("#adapters [data-adapter=web]")).to_contain_text("connected")
    await expect(page.locator("#semantic-health")).to_contain_text("healthy")
    await expect(page.locator("#semantic-health")).to_contain_text("search: hybrid · runs: 2")
    await screenshot(page, tmp_path / "dashboard-desktop.png", DESKTOP)

    # A newcomer is approved by clicking.
    request = page.locator(f'[data-code="{code}"]')
    await expect(request).to_contain_text("Cousin Meera")
    await expect(request).to_contain_text("@meera · telegram · id 5550001")
    await request.get_by_label("name").fill("Meera")
    await request.get_by_label("role").select_option("child")
    await request.get_by_label("age group").select_option("adolescent")
    await request.locator("button.approve").click()
    await expect(page.locator(f'[data-code="{code}"]')).to_have_count(0)
    await expect(page.locator("#pairing-list")).to_contain_text("No one is waiting")
    meera = services.family.member("meera")
    assert meera is not None and (meera.name, meera.role, meera.age_group) == ("Meera", "child", "adolescent")
    assert meera.telegram_user_id == 5550001 and "id: meera" in services.paths.config_file.read_text()
    assert await services.pairing.list_pending() == []
    approval = (await services.audit.tail(1, kind="pairing_approved"))[0]
    assert (approval["code"], approval["by"]) == (code, "admin:dashboard")
    await expect(page.locator('tr[data-principal="meera"]')).to_contain_text("child, adolescent")  # policy sees her

    # Distilling by hand runs the real distillation over mom's transcript.
    await expect(page.locator("#distillation-health")).to_contain_text("on")
    await mom.get_by_role("button", name="Distill now").click()
    await expect(page.locator("#toast")).to_contain_text(f"Distilled {SEEDED}: 2 new lines, 0 facts and 2 notes added.")
    await expect(page.locator("#distillation-health")).to_contain_text("1 chat tracked")
    assert (await services.memory.status())["scopes"][SEEDED]["distill"]["runs"] == 1

    # What halo remembers is shown as text: markup in a memory file never runs.
    await mom.get_by_role("button", name="Memory").click()
    await expect(page.locator("#memory-text")).to_contain_text("Dentist: Friday <script>alert(1)</script>")

    # The policy table explains a decision when tapped.
    await page.locator("#policy-scope").select_option("telegram:-1001234")
    await page.locator('tr[data-principal="aarav"] button').first.click()
    await expect(page.locator("#policy-why")).to_contain_text("parents group is for parents only")

    # Recent events, and clearing a chat (the confirm dialog is accepted).
    await expect(page.locator("#event-list")).to_contain_text(f"pairing approved code: {code} by: admin:dashboard")
    page.once("dialog", lambda dialog: dialog.accept())
    await mom.get_by_role("button", name="Clear chat").click()
    await expect(mom).to_contain_text("0 in session")
    assert problems == []

    used, _ = await open_dashboard(browser, link, PHONE)  # the same link again: it worked once
    await expect(used.locator("h1")).to_have_text("This login link no longer works")
    await expect(used.locator("body")).to_contain_text("uv run halo dashboard")
    await screenshot(used, tmp_path / "login-used-phone.png", PHONE)
    phone, phone_problems = await open_dashboard(browser, login_link(harness), PHONE)
    await expect(phone.locator(f'[data-scope="{SEEDED}"]')).to_be_visible()
    width = await phone.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], "the page must not scroll sideways on a phone"
    await screenshot(phone, tmp_path / "dashboard-phone.png", PHONE)
    assert phone_problems == []
    assert (tmp_path / "dashboard-desktop.png").stat().st_size > 10_000


async def same_times_as_halo(page: Any, harness: AdminHarness) -> None:
    """The dashboard's `when` and halo/core/times.py write every instant alike (this year and
    another), and the reminders panel shows its due time in those words."""
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo

    from halo.core.times import say_time
    from halo.reminders.store import ReminderStore

    zone = ZoneInfo(harness.halo.family.family.timezone)
    now = datetime.now(UTC)
    instants = [now, datetime(2024, 2, 29, 23, 5, tzinfo=UTC), datetime(now.year, 1, 1, 0, 0, tzinfo=UTC)]
    for at in instants:
        assert await page.evaluate("(iso) => when(iso)", at.isoformat()) == say_time(at, zone, now)
    pending = next(r for r in await ReminderStore(harness.halo.db).pending_for("mom", is_parent=True) if r.id == 1)
    await expect_text(page.locator('[data-reminder="1"]'), f"due {say_time(pending.due_at, zone, now)}")


async def expect_text(locator: Any, text: str) -> None:
    from playwright.async_api import expect

    await expect(locator).to_contain_text(text)


async def test_from_another_machine_the_page_asks_for_the_token(admin, browser, tmp_path: Path):
    from playwright.async_api import expect

    harness, _ = await family_halo(admin)
    remote = harness.remotes[0]
    page, problems = await open_dashboard(browser, remote.base + "/", PHONE)
    await expect(page.locator("#signin")).to_be_visible()
    assert await page.locator("[data-scope]").count() == 0
    await page.screenshot(path=str(tmp_path / "dashboard-signin-phone.png"))
    await page.locator("#token-input").fill("wrong")
    await page.locator("#signin button[type=submit]").click()
    await expect(page.locator("#signin-error")).to_contain_text("not accepted")
    await page.locator("#token-input").fill(ADMIN_TOKEN)
    await page.locator("#signin button[type=submit]").click()
    await expect(page.locator(f'[data-scope="{SEEDED}"]')).to_be_visible()
    await expect(page.locator("#signin")).to_be_hidden()
    # Loopback-only powers are not offered from another machine.
    assert await page.get_by_role("button", name="Purge…").count() == 0
    await expect(page.locator("#events-note")).to_contain_text("Events about telegram:1003")  # the latest chat
    await expect(page.locator("#event-list")).to_contain_text("mom read memory telegram:1003")
    await page.screenshot(path=str(tmp_path / "dashboard-remote-phone.png"), full_page=True)
    # The browser saw only the refusals themselves (the first 401s, and 403 from the loopback-only
    # event log, which is how the page learns it is remote): no script error, no CSP violation.
    assert all("status of 401" in p or "status of 403" in p for p in problems), problems


async def test_a_parent_reads_a_young_childs_chat_but_not_a_teens(admin, browser, tmp_path: Path):
    """The Children panel shows each child's limits; a chat opens only as the policy allows."""
    from playwright.async_api import expect

    harness, _ = await family_halo(admin)
    await harness.seed("telegram:1004")  # Tara, a young child
    page, problems = await open_dashboard(browser, login_link(harness), DESKTOP)
    await expect(page.locator("body[data-loaded=true]")).to_have_count(1)

    tara = page.locator('[data-child="tara"]')
    await expect(tara).to_contain_text("young child")
    await expect(tara).to_contain_text("600")
    await expect(tara).to_contain_text("Wags, Mom")
    await tara.get_by_role("button", name="Read telegram chat").click()
    await expect(page.locator("#child-chat")).to_contain_text("The dentist is on Friday.")

    aarav = page.locator('[data-child="aarav"]')
    await expect(aarav).to_contain_text("no one")
    await aarav.get_by_role("button", name="Read telegram chat").click()
    await expect(page.locator("#child-chat")).to_contain_text("read only by the child")
    await expect(page.locator("#child-chat")).not_to_contain_text("dentist")
    await page.screenshot(path=str(tmp_path / "dashboard-children.png"), full_page=True)

    reads = await harness.services.audit.tail(10, kind="transcript_read")
    assert [(e["reader"], e["scope_id"], e["allowed"]) for e in reads] == [
        ("wags", "telegram:1004", True),
        ("wags", "telegram:1003", False),
    ]
    assert all("status of 403" in p for p in problems), problems  # the refused read, nothing else


HOME_RULES_YAML = """
home:
  rules:
    - id: basement-leak
      when: {topic: zigbee2mqtt/basement_leak, field: water_leak, equals: true}
      say: "Water leak in the basement!"
      to: [parents]
      urgent: true
"""


async def test_the_home_panel_shows_the_rules_and_what_the_house_said(admin, browser):
    from datetime import UTC, datetime

    from playwright.async_api import expect

    from halo.home.events import RuleReport
    from halo.port import Observation
    from tests.admin.conftest import ADMIN_YAML

    harness = await admin(ADMIN_YAML + HOME_RULES_YAML)
    assert harness.halo.home is not None
    await harness.halo.home.observe(
        Observation(
            topic="zigbee2mqtt/basement_leak",
            source="zigbee2mqtt",
            entity="basement_leak",
            payload={"water_leak": True, "battery": 97, "linkquality": 120},
            received_at=datetime.now(UTC),
        )
    )
    page, problems = await open_dashboard(browser, login_link(harness), DESKTOP)
    await expect(page.locator("body[data-loaded=true]")).to_have_count(1)
    rule = page.locator('[data-rule="basement-leak"]')
    await expect(rule).to_contain_text("fired once since halo started")
    await expect(rule).to_contain_text("zigbee2mqtt/basement_leak · water_leak")
    await expect(rule).to_contain_text("basement_leak: fired")
    states = page.locator("#home-states")
    await expect(states).to_contain_text("basement_leak (zigbee2mqtt): water_leak=true, battery=97")
    assert not problems, problems

    # After a restart halo knows when the rule last fired (halo.db), not this run's count or outcome:
    # the panel says so rather than "fired 0× … last fired 12:11 … nothing seen yet".
    home = harness.halo.home
    home.reports = {r.id: RuleReport() for r in home.rules}  # what a fresh start holds …
    await home.recall_last_fired()  # … and what it reads back at start
    fired_at = home.reports["basement-leak"].last_fired_at
    assert fired_at is not None
    await page.reload()
    await expect(page.locator("body[data-loaded=true]")).to_have_count(1)
    rule = page.locator('[data-rule="basement-leak"]')
    await expect(rule).to_contain_text(f"last fired {await page.evaluate('(iso) => when(iso)', fired_at.isoformat())}")
    await expect(rule).to_contain_text("Nothing has come in since halo last started.")
    await expect(rule).not_to_contain_text("0×")
    await expect(rule).not_to_contain_text("Nothing seen yet")


async def test_the_tasks_panel_shows_what_halo_is_working_on(admin, browser):
    from playwright.async_api import expect

    harness = await admin()
    tasks = harness.halo.tasks
    assert tasks is not None
    await tasks.add("ContextForge", "Write the migration guide", scope_id="discord:3001", by="priya")
    await tasks.start(1, by="priya")
    await tasks.note(1, "drafted <b>two</b> sections", by="priya")
    await tasks.add("Halo", "Ship Discord", scope_id="discord:3001", by="wags")
    await tasks.block(2, "waiting for the bot token", by="wags")
    page, problems = await open_dashboard(browser, login_link(harness), DESKTOP)
    await expect(page.locator("body[data-loaded=true]")).to_have_count(1)

    doing = page.locator('#task-list [data-number="1"]')
    await expect(doing).to_contain_text("#1 Write the migration guide")
    await expect(doing).to_contain_text("doing")
    await expect(doing).to_contain_text("note: drafted <b>two</b> sections")  # text, never markup
    await expect(page.locator('#task-list [data-number="2"][data-status="blocked"]')).to_contain_text(
        "blocked: waiting for the bot token"
    )
    await expect(page.locator("#task-count")).to_have_text("2")
    assert problems == []


async def test_the_memory_panel_lists_a_chats_documents_and_deletes_one(admin, browser):
    from playwright.async_api import expect

    from tests.admin.test_files_api import MOM_DM, send_document

    harness = await admin()
    await send_document(harness.halo)
    page, problems = await open_dashboard(browser, login_link(harness), DESKTOP)
    await expect(page.locator("body[data-loaded=true]")).to_have_count(1)

    await page.locator("#memory-scope").select_option(MOM_DM)
    await page.locator("#memory-load").click()
    files = page.locator("#files-list")
    await expect(files).to_contain_text("trip.pdf")
    await expect(files).to_contain_text("2 pages")
    await expect(page.locator("#files-meta")).to_contain_text("1 document")

    page.once("dialog", lambda dialog: dialog.accept())
    await files.get_by_role("button", name="Delete trip.pdf").click()
    await expect(page.locator("#toast")).to_contain_text("Deleted trip.pdf.")
    await expect(page.locator("#files-meta")).to_contain_text("No documents were sent in this chat.")
    assert await memory_names(harness.halo, harness.services.paths.scope_dir(MOM_DM) / "files") == []
    assert not problems, problems


async def test_the_chat_page_signs_in_like_the_dashboard_and_shows_what_halo_says_on_its_own(admin, browser, tmp_path):
    """The login link's cookie opens /chat too (as the owner); without a credential the page says
    how to get in; the web inbox (a home alert here) appears while the page is open."""
    from playwright.async_api import expect

    harness = await admin()
    locked, _ = await open_dashboard(browser, harness.local.base + "/chat", PHONE)
    signin = locked.locator("#signin")
    await expect(signin).to_be_visible()
    await expect(signin).to_contain_text("halo dashboard")  # the login link's command, and the token
    await expect(signin).to_contain_text("web token")
    await expect(locked.locator("#form")).to_be_hidden()
    assert "optional" not in (await locked.content()).lower()

    page, problems = await open_dashboard(browser, login_link(harness), DESKTOP)
    assert page.url == harness.local.base + "/"
    await page.goto(harness.local.base + "/chat")
    await expect(page.locator("body[data-signed-in=true]")).to_have_count(1)
    await expect(page.locator("#who")).to_contain_text("Wags")  # the owner: `owner: wags`
    await page.locator("#text").fill("/whoami")
    await page.locator("#form button[type=submit]").click()
    await expect(page.locator(".msg.halo")).to_contain_text("You are Wags")
    await page.reload()  # the conversation so far comes back, read from the transcript
    await expect(page.locator("body[data-history=loaded]")).to_have_count(1)
    await expect(page.locator(".msg.me[data-history]")).to_have_text("/whoami")
    await expect(page.locator(".msg.halo[data-history]")).to_contain_text("You are Wags")

    alert = "The garage door has been open for 10 minutes."
    await harness.services.delivery.send("web:wags", alert, kind="proactive")
    await expect(page.locator(".msg.inbox")).to_contain_text(alert, timeout=30_000)  # polled every 3 s
    await expect(page.locator(".msg.inbox")).to_contain_text("home")
    await page.reload()  # the inbox is kept: it is there after a reload, once
    await expect(page.locator(".msg.inbox")).to_have_count(1)
    await expect(page.locator(".msg.halo[data-history]")).to_contain_text("You are Wags")
    await screenshot(page, tmp_path / "chat-desktop.png", DESKTOP)
    await screenshot(page, tmp_path / "chat-phone.png", PHONE)
    assert problems == []

    # Signing out ends the session in halo, not only on this page: a reload finds it signed out.
    await page.get_by_role("button", name="Sign out").click()
    await expect(page.locator("body[data-signed-in=false]")).to_have_count(1)
    await page.reload()
    await expect(page.locator("#signin")).to_be_visible()
    assert await page.locator(".msg").count() == 0

    # A member's own web token works as well, from a browser with no cookie; a wrong one is said so.
    other, _ = await open_dashboard(browser, harness.local.base + "/chat", PHONE)
    await other.locator("#token").fill("not-a-token")
    await other.locator("#token-form button").click()
    await expect(other.locator("#signin-error")).to_contain_text("not one halo knows")
    await other.locator("#token").fill("aarav-token")
    await other.locator("#token-form button").click()
    await expect(other.locator("#who")).to_contain_text("Aarav")
    await expect(other.locator(".msg.inbox")).to_have_count(0)  # Wags's alert is Wags's


SPEND_YAML = """
llm:
  prices:
    gpt-big: {input: 10.0, output: 30.0}
    gpt-small: {input: 1.0, output: 2.0}
budget: {daily_usd: 1.0, member_daily_usd: 0.5}
"""


async def test_the_spend_panel_shows_today_and_this_month_against_the_budget(admin, browser, tmp_path: Path):
    """Mom has spent more than her day's budget today: the panel says so (not "Nothing spent"),
    per person and per model, with amounts on the bars, the budget line and what is left."""
    import time

    from playwright.async_api import expect

    from halo.usage.store import UsageRecord
    from tests.admin.conftest import ADMIN_YAML

    harness = await admin(ADMIN_YAML + SPEND_YAML)
    meter = harness.halo.usage
    today, now = meter.today(), time.time()
    first = today[:8] + "01"
    calls = [  # (day, model, member, input tokens, output tokens): $0.60, $0.02 and $0.10 today
        (today, "gpt-big", "mom", 30_000, 10_000),
        (today, "gpt-small", "wags", 10_000, 5_000),
        (today, "gpt-big", "wags", 4_000, 2_000),
    ]
    if first != today:
        calls.append((first, "gpt-big", "mom", 100_000, 0))  # $1.00 on the 1st
    await meter.store.add_many(
        UsageRecord(ts=now, day=day, model=model, purpose="reply", input_tokens=inp, cached_tokens=0,
                    output_tokens=out, member_id=who, scope_id=f"web:{who}", level="L3")
        for day, model, who, inp, out in calls
    )  # fmt: skip
    page, problems = await open_dashboard(browser, login_link(harness), DESKTOP)
    await expect(page.locator("body[data-loaded=true]")).to_have_count(1)

    today_box = page.locator("#spend-today")
    await expect(today_box.locator("h3")).to_contain_text(": $0.72")
    await expect(today_box.locator('[data-spend="mom"]')).to_contain_text("Mom")
    await expect(today_box.locator('[data-spend="mom"] .amount')).to_have_text("$0.60")
    await expect(today_box.locator('[data-spend="wags"] .amount')).to_have_text("$0.12")
    await expect(today_box.locator('[data-spend="gpt-big"] .amount')).to_have_text("$0.70")
    await expect(today_box.locator('[data-spend="gpt-small"] .amount')).to_have_text("$0.02")
    await expect(today_box).to_contain_text("Family's daily budget $1.00: $0.28 left")
    await expect(today_box.locator('[data-left="mom"]')).to_have_text("Mom: $0.50 a day, spent ($0.10 over)")
    await expect(today_box.locator('[data-left="wags"]')).to_have_text("Wags: $0.38 of $0.50 left today")
    month = page.locator("#spend-month")
    month_total = "$1.72" if first != today else "$0.72"
    await expect(month.locator("h3")).to_contain_text(
        f"This month (since {await page.evaluate('(d) => day(d)', first)}): {month_total}"
    )
    chart = page.locator("#spend-chart")
    await expect(chart.locator(".budget-line")).to_have_count(1)
    await expect(chart).to_contain_text("budget $1.00")
    await expect(chart.locator(".bar-amount").last).to_have_text("$0.72")  # today's bar, amount on it
    await expect(page.locator("#spend-total")).to_have_text(f"$0.72 today · {month_total} this month")
    await screenshot(page, tmp_path / "dashboard-spend-desktop.png", DESKTOP)
    if SHOTS:
        await page.locator("#spend").screenshot(path=os.path.join(SHOTS, "spend-panel-desktop.png"))
    await page.locator("#spend").scroll_into_view_if_needed()
    await screenshot(page, tmp_path / "dashboard-spend-phone.png", PHONE)
    assert problems == []


async def test_an_embedder_that_cannot_load_is_one_warning_in_words(admin, browser, tmp_path: Path):
    from playwright.async_api import expect

    harness = await admin(memory={"semantic": {"embedder": "model2vec", "model": str(tmp_path / "no-such-model")}})
    await harness.seed()  # the index syncs and the embedder is tried
    page, problems = await open_dashboard(browser, login_link(harness), DESKTOP)
    await expect(page.locator("body[data-loaded=true]")).to_have_count(1)
    warnings = page.locator("#problems li")
    await expect(warnings.filter(has_text="meaning")).to_have_count(1)
    await expect(warnings.filter(has_text="meaning")).to_contain_text("finds memories by their words only")
    error = harness.halo.semantic.embedder_error
    assert error and error not in await page.locator("body").inner_text()  # the exception text is nowhere
    await expect(page.locator("#semantic-health")).to_contain_text("search: full-text only")
    await screenshot(page, tmp_path / "dashboard-warning-desktop.png", DESKTOP)
    if SHOTS:
        await page.locator("#overview").screenshot(path=os.path.join(SHOTS, "overview-desktop.png"))
    await screenshot(page, tmp_path / "dashboard-warning-phone.png", PHONE)
    assert problems == []
