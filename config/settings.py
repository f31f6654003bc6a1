"""Runtime settings: halo.yaml plus HALO_* environment overrides (`__` for nesting)."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from config.family import Family
from config.home import HomeSettings
from config.paths import HaloPaths, default_home

log = logging.getLogger(__name__)

_STRICT = ConfigDict(extra="forbid")

# the schemes storage.url accepts; the password never appears in an error
POSTGRESQL_SCHEMES = ("postgresql", "postgres", "postgresql+asyncpg")
FAMILY_ID_PATTERN = r"^[a-z0-9](?:[a-z0-9_-]{0,62}[a-z0-9])?$"

Provider = Literal["openai", "openai-compatible", "anthropic", "none"]


class ModelPrice(BaseModel):
    """What a model costs, in USD per million tokens."""

    model_config = _STRICT
    input: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0, description="unset: the input price")
    output: float = Field(ge=0)


class BudgetSettings(BaseModel):
    """A daily spend limit on models, the day in family.timezone (halo/usage/budget.py)."""

    model_config = _STRICT
    daily_usd: float | None = Field(default=None, gt=0, description="the whole family's; unset: no budget")
    member_daily_usd: float | None = Field(default=None, gt=0, description="each member's; unset: none")
    notice_share: float = Field(default=0.8, gt=0, lt=1, description="the parents are told once when this is spent")
    cheap_overrun_share: float = Field(
        default=0.1, ge=0, le=1, description="once spent, llm.cheap_model may spend this share more; then no model"
    )


class RoutingSettings(BaseModel):
    """Which model level answers a message (halo/routing/): extensions of the patterns in code."""

    model_config = _STRICT
    enabled: bool = Field(default=True, description="false: every message goes to llm.model, as before")
    acknowledgements: list[str] = Field(
        default_factory=list, description="more whole messages that need no model (e.g. 'ta', 'cheers')"
    )
    greetings: list[str] = Field(default_factory=list, description="more greetings that need no model")
    think_hard: list[str] = Field(default_factory=list, description="more phrases that ask for the strong model")
    small_replies: bool = Field(
        default=True, description="in a DM, a short canned answer to a greeting or thanks; false: none"
    )
    quiet_scopes: list[str] = Field(
        default_factory=list, description="scope ids where greetings and thanks get no answer, even in a DM"
    )
    triage: bool = Field(default=True, description="a short call on llm.cheap_model decides what the rules cannot")
    l0_in_history: bool = Field(
        default=False, description="keep messages that needed no model (thanks, 'ok') in the model's history"
    )
    l1_history_items: int | None = Field(
        default=8, ge=0, description="history items an L1 (small talk) reply is sent; null: as many as L2"
    )
    l1_tools: bool = Field(
        default=False, description="offer tools at L1 too (the rules place a message there only when it needs none)"
    )
    plain_words: bool = Field(
        default=True,
        description="'remind me to … at 5pm', 'add milk to the list', 'remember that …' done in code (L0), as commands",
    )
    l1_recall: bool = Field(
        default=False,
        description="send the day's notes, recall, documents and graph facts at L1 too (MEMORY.md, USER.md: always)",
    )


class LLMSettings(BaseModel):
    model_config = _STRICT

    provider: Provider = "none"
    model: str = "gpt-4.1-mini"
    cheap_model: str | None = None
    strong_model: str | None = Field(
        default=None, description="long or many-step requests, or a member asking to think hard (else llm.model)"
    )
    prices: dict[str, ModelPrice] = Field(
        default_factory=dict, description="USD per million tokens, per model name; adds to or overrides halo's defaults"
    )
    models: dict[str, str] = Field(default_factory=dict, description="per age-profile model choice")
    base_url: str | None = None
    api_key: SecretStr | None = None
    timeout_seconds: float = Field(default=60.0, gt=0)
    max_output_tokens: int = Field(default=2048, ge=16, description="reply length cap sent to the model")
    max_retries: int = Field(default=2, ge=0, le=10)
    retry_backoff_seconds: float = Field(default=0.5, ge=0)
    reply_deadline_seconds: float = Field(
        default=45, gt=0, description="a turn (classifier, retries, model, tools) answers within this, or says why"
    )
    max_retry_after_seconds: float = Field(
        default=10, ge=0, description="the longest a model's Retry-After is honoured before a retry"
    )
    max_model_turns: int = Field(
        default=8, ge=1, le=50, description="model calls one message may take (each round of tool calls is one)"
    )
    transcription_model: str | None = Field(
        default=None, description="turns voice notes into text (e.g. whisper-1, gpt-4o-mini-transcribe); unset: none"
    )
    max_voice_seconds: int = Field(default=300, ge=1, le=3600, description="longest voice note transcribed")
    max_voice_mb: int = Field(default=20, ge=1, le=25, description="largest voice note transcribed")
    max_tool_calls: int = Field(default=12, ge=0, le=100, description="tool calls one message may make")
    vision: bool = Field(default=True, description="the model can look at photos; false: halo says it cannot")
    max_image_mb: int = Field(default=10, ge=1, le=20, description="largest photo shown to the model")
    image_detail: Literal["low", "high", "auto"] = Field(
        default="low", description="how closely the model looks at a photo (low: a small fixed token cost)"
    )
    tracing: bool = False

    def resolved_api_key(self) -> str | None:
        """Config first, then the provider's usual environment variable."""
        if self.api_key:
            return self.api_key.get_secret_value()
        env = "ANTHROPIC_API_KEY" if self.provider == "anthropic" else "OPENAI_API_KEY"
        return os.environ.get(env)


class TelegramSettings(BaseModel):
    model_config = _STRICT
    token: SecretStr | None = None
    base_url: str | None = Field(
        default=None, description="a self-hosted Bot API server, e.g. http://127.0.0.1:8081/bot"
    )
    webhook_url: str | None = Field(default=None, description="public https URL; unset means long polling")
    webhook_secret: SecretStr | None = Field(default=None, description="default: derived from the token")
    poll_timeout_seconds: float = Field(default=30, ge=0, le=60, description="long-poll wait per getUpdates")
    send_retries: int | None = Field(
        default=None, description="deprecated and ignored: halo's outbox retries every message with backoff"
    )
    retry_backoff_seconds: float = Field(default=1.0, gt=0, description="first wait after a network error")
    draft_interval_ms: int = Field(
        default=600, ge=100, le=10_000, description="a DM's streamed draft is updated at most this often"
    )
    stream_drafts: bool = Field(default=True, description="stream replies into a draft in DMs (sendMessageDraft)")
    react_on_receipt: bool = Field(default=True, description="👀 on a DM message while halo works on it")

    @field_validator("send_retries")
    @classmethod
    def _send_retries_is_ignored(cls, value: int | None) -> int | None:
        if value is not None:
            log.warning("telegram.send_retries is deprecated and ignored: the outbox retries every message")
        return value


class DiscordSettings(BaseModel):
    model_config = _STRICT
    token: SecretStr | None = None
    api_base_url: str | None = Field(
        default=None, description="a stand-in Discord REST API (tests only), e.g. http://127.0.0.1:9000/api/v10"
    )
    gateway_url: str | None = Field(default=None, description="a stand-in Discord gateway (tests only), ws://…")
    guild_ready_seconds: float = Field(
        default=2.0,
        gt=0,
        le=60,
        description="how long discord.py waits after the last server arrives before halo is ready (its default)",
    )


DEFAULT_MQTT_TOPICS = [
    "zigbee2mqtt/#",
    "frigate/events",
    "owntracks/+/+/event",
    "homeassistant/+/+/state",
    "halo/events/#",
]


class MQTTSettings(BaseModel):
    """The family's broker (home events). No host: no MQTT, and no error."""

    model_config = _STRICT
    host: str | None = None
    port: int = Field(default=1883, ge=1, le=65535)
    username: str | None = None
    password: SecretStr | None = None
    tls: bool = Field(default=False, description="TLS with the system's CA certificates (or ca_certs)")
    ca_certs: Path | None = None
    client_id: str = Field(default="halo", min_length=1, description="fixed: the broker keeps our session")
    topics: list[str] = Field(default_factory=lambda: list(DEFAULT_MQTT_TOPICS))
    topic_prefix: str = Field(
        default="", description="a shared or bridged broker: subscribe under it, rules see topics without it"
    )
    keepalive_seconds: int = Field(default=30, ge=5, le=3600)
    reconnect_max_seconds: float = Field(default=60, gt=0, description="longest pause between reconnects")


class AdminSettings(BaseModel):
    model_config = _STRICT
    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=0, le=65535)
    token: SecretStr | None = None
    max_connections: int = Field(default=256, ge=1, description="open at once; past it new ones are closed")
    read_timeout_seconds: float = Field(default=30, gt=0, description="a client silent mid-request this long is cut")
    max_connections_per_address: int = Field(
        default=32, ge=1, description="open at once from one address; past it, its longest-waiting one is closed"
    )
    header_timeout_seconds: float = Field(default=10, gt=0, description="a request's head must arrive within this")
    body_timeout_seconds: float = Field(default=30, gt=0, description="a request's body must arrive within this")
    shutdown_seconds: float = Field(
        default=20, gt=0, le=600, description="SIGTERM to exit, whatever is running; the rest is caught up on start"
    )


EmbedderName = Literal["model2vec", "openai", "sentence-transformers", "none"]

DEFAULT_EMBEDDING_MODELS: dict[str, str] = {
    "model2vec": "minishlab/potion-base-8M",
    "openai": "text-embedding-3-small",
}


class SemanticSettings(BaseModel):
    """Semantic recall: the per-scope hybrid index (sqlite-vec + FTS5) and its embedder."""

    model_config = _STRICT
    enabled: bool = True
    sync_interval_minutes: float = Field(default=5, gt=0)
    embedder: EmbedderName = Field(default="model2vec", description="`local` is accepted as model2vec")
    model: str | None = Field(default=None, description="model id or local path; default per embedder")
    base_url: str | None = Field(default=None, description="openai: /v1 base; default llm.base_url")
    api_key: SecretStr | None = None
    dimensions: int | None = Field(default=None, ge=8, le=8192, description="openai: ask for this many dims")
    batch_size: int = Field(default=64, ge=1, le=2048)
    top_k: int = Field(default=4, ge=1, le=20, description="recalled chunks added to each turn")
    context_tokens: int = Field(default=600, ge=50, description="budget for the recalled section")
    min_score: float = Field(default=0.3, ge=0, le=1)
    vector_weight: float = Field(default=0.6, ge=0, le=1, description="text weight is 1 - this")
    half_life_days: float = Field(default=90, gt=0, description="recency decay of dated notes")
    mmr_lambda: float = Field(default=0.7, ge=0, le=1, description="1 = relevance only, 0 = diversity only")
    window_turns: int = Field(default=2, ge=0, le=5, description="turns shown before and after a recalled turn")
    day_weight: float = Field(default=0.2, ge=0, le=1, description="lift for turns of the day most about the query")
    max_mirrored_vectors: int = Field(default=300_000, ge=0, description="above this, search with vec0 KNN")

    @field_validator("embedder", mode="before")
    @classmethod
    def _local_is_model2vec(cls, value: Any) -> Any:
        return "model2vec" if value == "local" else value

    @property
    def resolved_model(self) -> str | None:
        return self.model or DEFAULT_EMBEDDING_MODELS.get(self.embedder)


class GraphSettings(BaseModel):
    """Graph memory (Graphiti on FalkorDB): who, what and since when, per scope. Needs the
    optional extra (`uv sync --extra graph`) and an OpenAI-compatible `llm` provider."""

    model_config = _STRICT
    enabled: bool = False
    url: str | None = Field(default=None, description="redis://host:port of a FalkorDB; null: halo runs its own")
    daily_token_budget: int = Field(default=200_000, ge=0, description="model tokens graph ingestion may spend a day")
    max_output_tokens: int = Field(default=2048, ge=256, description="output cap of each ingestion call")
    context_facts: int = Field(default=6, ge=0, le=30, description="graph facts recalled into each turn")
    search_limit: int = Field(default=10, ge=1, le=50, description="facts searched per readable scope")


class MemorySettings(BaseModel):
    model_config = _STRICT
    distillation_enabled: bool = True
    distillation_every_n_items: int = Field(default=20, ge=1)
    extractor: Literal["deterministic", "llm"] = Field(
        default="deterministic",
        description="llm: also learn from quiet scopes with llm.cheap_model (or llm.model)",
    )
    quiet_minutes: float = Field(default=10, gt=0, description="model extraction runs after this much quiet")
    extraction_chunk_turns: int = Field(default=12, ge=1, description="signal turns sent to the model at once")
    extraction_overlap_turns: int = Field(default=2, ge=0, description="turns repeated as context between chunks")
    daily_transcript: bool = Field(default=True, description="[user]/[halo] lines in each scope's daily file")
    max_document_mb: int = Field(default=10, ge=1, le=50, description="largest document a member may send to read")
    max_document_pages: int = Field(default=200, ge=1, le=5000, description="longest PDF read, in pages")
    max_document_chars: int = Field(
        default=400_000, ge=1000, description="longest text kept from one document (about 100k tokens)"
    )
    document_read_seconds: float = Field(
        default=60, gt=0, le=600, description="download and reading of one document; then its reader is killed"
    )
    document_reader_mb: int = Field(
        default=512, ge=128, le=8192, description="memory the process reading one document may use"
    )
    max_documents_reading: int = Field(
        default=2, ge=1, le=32, description="documents read at once, family-wide (one per member); the rest wait"
    )
    document_excerpt_tokens: int = Field(
        default=2000, ge=100, le=20_000, description="the beginning of a just-sent document shown to the model"
    )
    semantic: SemanticSettings = Field(default_factory=SemanticSettings)
    graph: GraphSettings = Field(default_factory=GraphSettings)


class BackupSettings(BaseModel):
    """`halo export` archives made on a schedule into HALO_HOME/backups (halo/workspace/backups.py)."""

    model_config = _STRICT
    schedule: str | None = Field(
        default=None, pattern=r"^daily ([01]\d|2[0-3]):[0-5]\d$", description='e.g. "daily 03:30" (family timezone)'
    )
    keep: int = Field(default=7, ge=1, description="the newest this many archives are kept")


class SessionSettings(BaseModel):
    model_config = _STRICT
    url: str | None = Field(
        default=None,
        description="deprecated and ignored: the model's session is read from the transcript (no sessions.db)",
    )
    history_token_budget: int = Field(default=4000, ge=200, description="tokens of history the model is sent")
    history_max_items: int = Field(
        default=100,
        ge=10,
        description="history items the model is sent at most (a long run of short messages costs per item)",
    )
    answer_missed_minutes: float = Field(
        default=10,
        ge=0,
        description="on start, a chat message this recent that a crash left unanswered is answered (0: never)",
    )
    apologise_missed_hours: float = Field(
        default=24,
        ge=0,
        description="an older unanswered message, up to this old, gets one short 'sorry, I was restarted'",
    )

    @field_validator("url")
    @classmethod
    def _url_is_ignored(cls, value: str | None) -> str | None:
        if value is not None:
            log.warning("sessions.url is deprecated and ignored: the session is read from the transcript")
        return value


class ToolSettings(BaseModel):
    model_config = _STRICT
    search_url: str | None = Field(
        default=None,
        description="a SearXNG instance (its JSON API, e.g. http://127.0.0.1:8888) for the web_search tool; "
        "unset: no web search",
    )
    search_results: int = Field(default=5, ge=1, le=20, description="results web_search gives the model")
    hosted_search: bool = Field(
        default=True, description="with llm.provider openai and no search_url: OpenAI's own hosted web search"
    )
    approval_minutes: float = Field(
        default=30, gt=0, le=24 * 60, description="how long a consequential tool call waits for a parent's yes or no"
    )

    @field_validator("search_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("tools.search_url must start with http:// or https://")
        return value.rstrip("/") if value else value


class ReminderSettings(BaseModel):
    """`/remind` and the reminder tools (halo/reminders)."""

    model_config = _STRICT
    children_may_remind_parents: bool = Field(
        default=False, description="a child may set reminders for parents, not only for themself"
    )
    catch_up_minutes: float = Field(
        default=60, ge=0, description="a reminder halo was down for is still sent this late; older ones are reported"
    )


class StorageSettings(BaseModel):
    """Where halo.db's tables live. Unset `url`: the embedded SQLite file in HALO_HOME."""

    model_config = _STRICT
    url: SecretStr | None = Field(
        default=None,
        description="postgresql://user:password@host:port/database: PostgreSQL keeps halo.db's tables; "
        "unset: $HALO_HOME/halo.db",
    )
    family_id: str | None = Field(
        default=None,
        pattern=FAMILY_ID_PATTERN,
        description="the id every stored row carries (a slug); default: family.name as a slug",
    )
    lease_seconds: float = Field(
        default=10,
        gt=0,
        le=600,
        description="PostgreSQL: how long the active process keeps the family after its last renewal "
        "(a standby takes over then, or at once when the active one's database session ends)",
    )

    @field_validator("url")
    @classmethod
    def _postgresql_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        return SecretStr(postgresql_url(value.get_secret_value().strip()))


class ClusterSettings(BaseModel):
    """Several processes serving one family on PostgreSQL (storage.url)."""

    model_config = _STRICT
    advertise_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s/]+(/\S*)?$",
        description="where the other processes forward requests that reach them to this one, when it is the "
        "active one; default http://127.0.0.1:<admin.port>",
    )


def postgresql_url(url: str) -> str:
    """`postgresql://…` (or `postgres://…`, `postgresql+asyncpg://…`) as SQLAlchemy's asyncpg URL."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in POSTGRESQL_SCHEMES or not rest:
        raise ValueError(
            "storage.url must be a PostgreSQL URL like postgresql://halo:secret@127.0.0.1:5432/halo "
            f"(got a URL starting {scheme[:20]!r})"
        )
    return f"postgresql+asyncpg://{rest}"


def family_slug(name: str) -> str:
    """`family.name` as an id: "The Sharmas" → "the-sharmas" (never empty)."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:64].strip("-")
    return slug or "family"


class Settings(BaseSettings, Family):
    """The whole halo.yaml. Unknown keys are errors; the environment wins over the file."""

    model_config = SettingsConfigDict(env_prefix="HALO_", env_nested_delimiter="__", extra="forbid", frozen=True)

    home: Path = Field(default_factory=default_home)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    telegram: TelegramSettings = Field(default_factory=TelegramSettings)
    discord: DiscordSettings = Field(default_factory=DiscordSettings)
    mqtt: MQTTSettings = Field(default_factory=MQTTSettings)
    # halo.yaml's `home:` section; `home` itself is HALO_HOME (the loader moves the section here)
    home_events: HomeSettings = Field(default_factory=HomeSettings)
    admin: AdminSettings = Field(default_factory=AdminSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    sessions: SessionSettings = Field(default_factory=SessionSettings)
    backups: BackupSettings = Field(default_factory=BackupSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    reminders: ReminderSettings = Field(default_factory=ReminderSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    routing: RoutingSettings = Field(default_factory=RoutingSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    cluster: ClusterSettings = Field(default_factory=ClusterSettings)

    @model_validator(mode="after")
    def _home_names_members(self) -> Settings:
        """A rule or quiet hours naming someone who is not in the family stops start-up."""
        for i, rule in enumerate(self.home_events.rules):
            for target in rule.member_targets():
                if self.member(target) is None:
                    raise ValueError(f"home.rules.{i}.to: {target!r} ({rule.id}) is not a member id")
        for member_id in self.home_events.member_quiet_hours:
            if self.member(member_id) is None:
                raise ValueError(f"home.member_quiet_hours: {member_id!r} is not a member id")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # init kwargs carry the parsed halo.yaml; the environment overrides it.
        return (env_settings, init_settings)

    @property
    def paths(self) -> HaloPaths:
        return HaloPaths(self.home)

    @property
    def family_id(self) -> str:
        """The id halo.db's rows carry: `storage.family_id`, else `family.name` as a slug."""
        return self.storage.family_id or family_slug(self.family.name)

    def family_view(self) -> Family:
        return Family.model_validate(self.model_dump(include=set(Family.model_fields)))

    def redacted(self) -> dict[str, Any]:
        """A snapshot safe to show: every secret masked."""
        return self.model_dump(mode="json")  # SecretStr dumps as '**********'
