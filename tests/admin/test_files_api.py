"""GET /scopes/{scopeId}/files and DELETE /scopes/{scopeId}/files/{number}: the documents members
sent, as a parent sees and removes them from the dashboard."""

from __future__ import annotations

from halo.core.envelope import Attachment, Envelope, Speaker
from halo.core.scopes import resolve_scope
from halo.inventory import Halo
from tests.admin.conftest import ADMIN_TOKEN
from tests.document_support import SCHOOL_LETTER
from tests.memory_files import memory_names

MOM_DM = "telegram:1002"


async def send_document(halo: Halo, data: bytes = SCHOOL_LETTER, name: str = "trip.pdf") -> None:
    """Mom sends a document in her Telegram DM, through the gateway (the download is the stand-in)."""
    family = halo.family

    async def download() -> bytes:
        return data

    mime = "application/pdf" if name.endswith(".pdf") else "text/plain"
    env = Envelope(
        "telegram",
        resolve_scope(family, MOM_DM),
        Speaker("1002", member=family.member("mom")),
        "",
        attachment=Attachment(download, "document", mime, name, len(data)),
    )
    reply = await halo.gateway.handle(env)
    assert reply.text is not None and f"I kept {name}" in reply.text, reply
    await halo.gateway.drain()


async def test_a_parent_lists_and_deletes_a_scopes_documents(admin):
    harness = await admin()
    await send_document(harness.halo)
    await send_document(harness.halo, b"Swimming moves to 10:30.\n", "swimming.txt")
    semantic = harness.services.semantic
    await semantic.sync_all([MOM_DM])
    folder = harness.services.paths.scope_dir(MOM_DM) / "files"  # its path in HALO_HOME: files, or rows

    listed = await harness.local.call("GET", f"/scopes/{MOM_DM}/files")
    assert listed.status == 200 and listed.body["scopeId"] == MOM_DM
    first, second = listed.body["files"]
    assert (first["number"], first["name"], first["pages"], first["addedBy"]) == (1, "trip.pdf", 2, "Mom")
    assert first["bytes"] == len(SCHOOL_LETTER) and first["path"] == "files/001-trip.pdf.md"
    assert (second["number"], second["name"], second["pages"]) == (2, "swimming.txt", None)

    removed = await harness.local.call("DELETE", f"/scopes/{MOM_DM}/files/1")
    assert removed.status == 200 and removed.body["removed"]["name"] == "trip.pdf"
    assert await memory_names(harness.halo, folder) == ["002-swimming.txt.md"]
    hits = await semantic.search([MOM_DM], "school trip science museum")
    assert not [h for h in hits if h.source.startswith("files/")], "its chunks left the index with it"
    again = await harness.local.call("GET", f"/scopes/{MOM_DM}/files")
    assert [f["number"] for f in again.body["files"]] == [2], "numbers do not shift"
    event = (await harness.services.audit.tail(1, kind="document_removed"))[0]
    assert (event["scope_id"], event["file"], event["by"]) == (MOM_DM, 1, "admin:token")

    gone = await harness.local.call("DELETE", f"/scopes/{MOM_DM}/files/1")
    bad = await harness.local.call("DELETE", f"/scopes/{MOM_DM}/files/one")
    zero = await harness.local.call("DELETE", f"/scopes/{MOM_DM}/files/0")
    nowhere = await harness.local.call("GET", "/scopes/telegram:55555/files")
    assert gone.status == 404 and "no file 1" in gone.body["error"]
    assert bad.status == 400 and zero.status == 400 and nowhere.status == 404


async def test_only_a_parents_credential_opens_the_files(admin):
    harness = await admin()
    await send_document(harness.halo)
    child = await harness.local.call("GET", f"/scopes/{MOM_DM}/files", token="aarav-token")
    child_delete = await harness.local.call("DELETE", f"/scopes/{MOM_DM}/files/1", token="aarav-token")
    parent = await harness.local.call("GET", f"/scopes/{MOM_DM}/files", token="mom-token")
    assert child.status == 403 and child_delete.status == 403 and parent.status == 200
    for remote in harness.remotes:
        assert (await remote.call("DELETE", f"/scopes/{MOM_DM}/files/1")).status == 401
    assert len((await harness.local.call("GET", f"/scopes/{MOM_DM}/files", token=ADMIN_TOKEN)).body["files"]) == 1
