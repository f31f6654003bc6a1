"""/openapi.json is the contract: generated from the route table and the body models, it documents
every route, routes every documented path (the adapters' pages too), and the handlers keep to it
(schemathesis, a bounded number of generated requests per operation)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.config import SchemathesisConfig

from adapters.web import WebChatAdapter
from admin_api.openapi import build_spec
from admin_api.routes import admin_routes
from config.loader import load_settings
from halo.inventory import Halo
from tests.admin.conftest import ADMIN_YAML, ask_to_join, memory_yaml, seed_document, seed_scope
from tests.admin.threaded import ThreadedHalo
from tests.conftest import write_home

pytestmark = pytest.mark.slow  # schemathesis against halo served from a thread (minutes)

# Generated requests per operation (derandomized: the same ones each run). 15 with a parent's
# credential take a third less of the suite's time than 25 did, and on this code both pass; the
# anonymous pass only needs to reach each handler's credential check.
EXAMPLES_PER_OPERATION = 15
ANONYMOUS_EXAMPLES = 5


async def test_every_route_is_documented_and_every_documented_path_is_routed(admin):
    harness = await admin()
    spec = (await harness.local.call("GET", "/openapi.json")).body
    assert spec == SPEC
    documented = {(method.upper(), path) for path, ops in spec["paths"].items() for method in ops}
    routed = {
        (route.method, route.resource.canonical)
        for route in harness.runner.app.router.routes()
        if route.method != "HEAD" and route.resource is not None
    }
    assert documented == routed
    access = {(r.method, r.path): r.access for r in admin_routes()}
    for (method, path), level in access.items():
        assert spec["paths"][path][method.lower()]["x-access"] == level, (method, path)
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            assert op.get("summary") and op.get("responses"), (method, path)
            if op["x-access"] == "token":
                assert "401" in op["responses"], (method, path)
            if op["x-access"] == "loopback":
                assert "403" in op["responses"], (method, path)


# what each access level's guard accepts (admin_api/guards.py, adapters/web.py): a credential, never none
CREDENTIALS = {
    "token": [{"adminToken": []}, {"memberToken": []}, {"dashboardSession": []}],  # a parent's web_token too
    "loopback": [{"adminToken": []}, {"memberToken": []}, {"dashboardSession": []}],
    "member": [{"memberToken": []}, {"dashboardSession": []}],
    "anyone": [],
}


def test_each_operation_declares_the_credentials_its_handler_accepts() -> None:
    """Being on this machine is no credential: only the open routes may be called anonymously."""
    for path, ops in SPEC["paths"].items():
        for method, op in ops.items():
            assert op["security"] == CREDENTIALS[op["x-access"]], (method, path, op["security"])


async def _seed(halo: Halo) -> None:
    """Data in every part, so each answer has something to keep to its schema."""
    await seed_scope(halo)
    await seed_scope(halo, "telegram:1003")
    for _ in range(3):  # documents to list, and to delete (schemathesis may delete 1, 2 and 3)
        await seed_document(halo)
    await ask_to_join(halo, 5550001)
    assert halo.tasks is not None
    await halo.tasks.add("ContextForge", "Write the migration guide", scope_id="discord:3001", by="priya")
    await halo.tasks.block(1, "waiting for review", by="priya")
    await halo.memory.distill("telegram:1003")


@pytest.fixture(scope="module")
def running_halo(tmp_path_factory: pytest.TempPathFactory, concept_model: Path) -> Iterator[ThreadedHalo]:
    yaml = ADMIN_YAML + "llm: {provider: none}\n" + memory_yaml(concept_model)
    home = write_home(Path(tmp_path_factory.mktemp("schemathesis")) / "home", yaml)
    server = ThreadedHalo(load_settings(home), prepare=_seed, remote_peer=("203.0.113.9", 40000)).start()
    yield server
    server.stop()


# The document `halo serve` serves (the admin API and the web chat); the first test checks they agree.
SPEC = build_spec(WebChatAdapter(cast(Any, None), cast(Any, None), cast(Any, None)).routes())
# Two things no OpenAPI schema can say, told to schemathesis instead:
# - purge's `confirm` must equal the path's scopeId: a schema-valid pair that differs is rightly refused (400);
# - the web chat answers an over-long message with 413 Content Too Large, a rejection like any 4xx.
CONFIG = SchemathesisConfig.from_str("""
[[operations]]
include-path = "/sessions/{scopeId}/purge"
checks.positive_data_acceptance.enabled = false

[[operations]]
include-path = "/api/chat"
checks.negative_data_rejection.expected-statuses = [400, 401, 403, 404, 405, 406, 409, 413, 415, 422]
""")
schema = schemathesis.openapi.from_dict(SPEC, config=CONFIG)


PARENT = {"Authorization": "Bearer mom-token"}  # a parent's own web_token: admin and member routes alike


@pytest.fixture(scope="module")
def http() -> Iterator[requests.Session]:
    """One client for the module's thousands of requests: kept connections, and no proxy
    lookup in the environment on every request (requests' `trust_env`)."""
    with requests.Session() as session:
        session.trust_env = False
        yield session


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_api_keeps_to_its_schema_with_a_parents_credential(
    case: schemathesis.Case, running_halo: ThreadedHalo, http: requests.Session
) -> None:
    case.call_and_validate(base_url=running_halo.url, session=http, headers=PARENT)


@schema.parametrize()
@settings(
    max_examples=ANONYMOUS_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_without_a_credential_everything_but_the_open_routes_refuses(
    case: schemathesis.Case, running_halo: ThreadedHalo, http: requests.Session
) -> None:
    """From this machine and from a remote peer alike: 401/403 everywhere but the open routes."""
    access = case.operation.definition.raw.get("x-access")
    for base_url in (running_halo.url, running_halo.remote_url):
        response = case.call_and_validate(base_url=base_url, session=http)
        if access != "anyone" and response.status_code not in (404, 405):
            assert response.status_code in (401, 403), (base_url, response.status_code, response.text[:200])
        if access == "loopback" and base_url == running_halo.remote_url and response.status_code not in (404, 405):
            assert response.status_code == 403
