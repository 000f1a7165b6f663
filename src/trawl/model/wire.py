"""The remote pipeline protocol's messages (docs/protocol.md), as msgspec Structs: what a
pipeline and the tracker server say to each other over the WebSocket at ``/ws/pipeline``.

Frames are JSON text. A pipeline's first frame is :class:`Hello`. Then it sends requests
``{"type", "seq", "request"}`` and gets replies ``{"status", "payload", "seq"}`` with the
same ``seq``; the server sends advisories ``{"type", "seq": null, "payload"}`` when it has
something to say. The bodies of each request type and its reply are below; the docs'
JSON Schemas are generated from them, so a pipeline in another language can be written
from the docs alone.

An attempt's effects cross as data (:data:`WireEffect`): a callback a task handed its
context (``update_data(fn)``, ``merge_item(merge=...)``) is run on the pipeline and sent
as what it did (an RFC 7396 merge patch, or the merged data).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from trawl.model.records import ClaimedJob
from trawl.model.states import Outcome

PROTOCOL: Literal["trawl-pipeline"] = "trawl-pipeline"
VERSION = 1
PATH = "/ws/pipeline"  # where trawl serve speaks it (not under /pipelines: the API's)
PING_EVERY = 15.0  # seconds between a pipeline's pings

Count = Annotated[int, msgspec.Meta(ge=0, le=10_000)]
JobId = Annotated[int, msgspec.Meta(ge=0, lt=2**62)]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Text = Annotated[str, msgspec.Meta(max_length=2048)]
Seconds = Annotated[float, msgspec.Meta(ge=0, le=10 * 365 * 86400)]
JSONObject = dict[str, Any]
TagPair = tuple[Name, str | None]


class Struct(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, kw_only=True):
    """Unknown fields are refused: a typo is an error, not silently ignored."""


# -- the hello -----------------------------------------------------------------------------


class LimitSpec(Struct):
    """A rate limit a task is subject to (unkeyed: keyed limits need the app's code)."""

    name: Name
    rate: Annotated[float, msgspec.Meta(gt=0, le=1e6)]  # permits per second
    burst: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 1
    tasks: list[Name] | None = None  # name patterns; null: a global limit


class TaskSpec(Struct):
    """A task the pipeline can run, as its app declares it."""

    name: Name
    version: Annotated[str, msgspec.Meta(max_length=200)]
    timeout: Annotated[float, msgspec.Meta(gt=0, le=7 * 86400)]
    tags: list[Name] = []
    ttl: Seconds | None = None
    retries: Annotated[int, msgspec.Meta(ge=0, le=1000)] = 3
    niceness: Annotated[int, msgspec.Meta(ge=-1_000_000, le=1_000_000)] = 0
    depends_on: list[Name] = []
    rerun_on_change: bool = True
    max_failures: Annotated[int, msgspec.Meta(ge=1)] | None = None
    pipeline_tag: Name | None = None
    weights: tuple[float, float, float] | None = None  # visit policy shares
    limits: list[LimitSpec] = []


class Hello(Struct):
    """A pipeline's first frame."""

    v: int  # the protocol version it speaks (VERSION)
    protocol: Literal["trawl-pipeline"]
    slots: Annotated[int, msgspec.Meta(ge=1, le=10_000)]
    owner: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]  # host:pid:random
    tasks: list[TaskSpec] = []
    client: Annotated[str, msgspec.Meta(max_length=200)] = ""  # e.g. "trawl 0.1.0"
    # What it can do beyond running its tasks: "browser" (it renders crawl pages in
    # Chromium; browser pages are routed only to pipelines that say so).
    capabilities: Annotated[list[Name], msgspec.Meta(max_length=20)] = []


class Welcome(Struct):
    """The server's first advisory: who the pipeline is and what it may claim."""

    pipeline: str
    session: str  # the session's live address
    slots: int  # what it may run at once: the lower of its hello's and its row's
    tasks: list[str]  # of its hello's tasks, the ones routed to it
    ping_every: float
    time: float  # the server's clock, seconds since the epoch
    draining: bool = False


# -- frames ----------------------------------------------------------------------------------


class RequestFrame(Struct):
    type: Annotated[str, msgspec.Meta(min_length=1, max_length=50)]
    seq: Annotated[int, msgspec.Meta(ge=0, lt=2**53)]
    request: Any = None


class ReplyFrame(Struct):
    """A reply (to the pipeline's request, or from the pipeline to a server query)."""

    status: Literal["ok", "error"]
    seq: int | str
    payload: Any = None


class Problem(Struct):
    """The payload of an error reply: ``field`` names the part of the request at fault."""

    type: str
    message: str
    field: str | None = None


# -- effects ---------------------------------------------------------------------------------


class Effect(Struct, tag_field="kind"):
    """Something an attempt asked for, applied with its commit."""


class CreateItem(Effect, tag="create_item"):
    id: Text
    tags: list[TagPair] = []
    data: JSONObject = {}
    fail_if_exists: bool = False
    created_by: Text | None = None


class UpsertItem(Effect, tag="upsert_item"):
    id: Text
    tags: list[TagPair] = []
    data: JSONObject = {}
    last_update: float | None = None
    created_by: Text | None = None


class RenameItem(Effect, tag="rename_item"):
    to: Text
    from_: Text = msgspec.field(name="from")


class MergeItem(Effect, tag="merge_item"):
    """*from* is merged into *into*: *data* is the merged data; *metadata* the merged
    result per task (tasks not named: the newest result wins)."""

    into: Text
    from_: Text = msgspec.field(name="from")
    data: JSONObject
    metadata: dict[Name, JSONObject] = {}


class DeleteItem(Effect, tag="delete_item"):
    id: Text


class CreateAlias(Effect, tag="create_alias"):
    alias: Text
    to: Text
    fail_if_exists: bool = False


class DeleteAlias(Effect, tag="delete_alias"):
    alias: Text


class PatchData(Effect, tag="patch_data"):
    """An RFC 7396 merge patch applied to the item's data as it is at commit."""

    id: Text
    patch: JSONObject


class PatchMetadata(Effect, tag="patch_metadata"):
    """An RFC 7396 merge patch applied to *task*'s stored result for the item."""

    id: Text
    task: Name
    patch: JSONObject


class Expire(Effect, tag="expire"):
    id: Text
    task: Name


class SetTTL(Effect, tag="set_ttl"):
    id: Text
    task: Name
    ttl: Seconds | None


class AddTags(Effect, tag="add_tags"):
    id: Text
    tags: list[TagPair]


class RemoveTags(Effect, tag="remove_tags"):
    id: Text
    names: list[Name]


class Log(Effect, tag="log"):
    id: Text
    task: Name
    category: Annotated[str, msgspec.Meta(max_length=200)]
    message: Annotated[str, msgspec.Meta(max_length=100_000)]


class Custom(Effect, tag="custom"):
    """An effect a layer above the engine defines and the server knows by *name* (the
    crawler's: ``crawl.fetched``, ``crawl.parked``, ``crawl.skipped``)."""

    name: Name
    body: Any = None


WireEffect = (
    CreateItem
    | UpsertItem
    | RenameItem
    | MergeItem
    | DeleteItem
    | CreateAlias
    | DeleteAlias
    | PatchData
    | PatchMetadata
    | Expire
    | SetTTL
    | AddTags
    | RemoveTags
    | Log
    | Custom
)


# -- attempts ---------------------------------------------------------------------------------


class Failure(Struct):
    error_type: Annotated[str, msgspec.Meta(max_length=1000)]
    message: Annotated[str, msgspec.Meta(max_length=100_000)]
    traceback: Annotated[str, msgspec.Meta(max_length=1_000_000)] = ""


class Attempt(Struct):
    """How one attempt ended: a local worker's AttemptResult, with its effects as data."""

    job_id: JobId
    item_id: Text
    task: Name
    attempt: Annotated[int, msgspec.Meta(ge=1)]
    outcome: Outcome
    version: Annotated[str, msgspec.Meta(max_length=200)]
    ttl: Seconds | None = None
    result: str | None = None  # the task's metadata as JSON text (a JSON object)
    effects: list[WireEffect] = []
    failure: Failure | None = None
    retry_delay: Seconds | None = None  # null with a failure: retries exhausted
    apply_on_failure: bool = False
    result_hash: Annotated[str, msgspec.Meta(max_length=200)] | None = None
    revisit_offset: int | None = None
    not_found: bool = False
    changed: bool = True
    defer_until: float | None = None


class Report(Struct):
    """What a commit did per attempt: committed (including a repeat of an attempt that had
    already committed: a no-op), stale (its lease was lost; nothing applied), or committed
    as a failure because its effects failed (with why)."""

    committed: list[int] = []
    stale: list[int] = []
    effect_failures: dict[str, str] = {}


# -- requests and their replies ----------------------------------------------------------------


class ClaimRequest(Struct):
    """``claim``: commit *results*, then lease up to *limit* jobs. *known*: after a claim
    whose reply was lost, the job ids the pipeline holds; the server first hands back the
    running jobs leased to it that it does not hold."""

    limit: Count
    results: list[Attempt] = []
    known: list[JobId] | None = None


class ClaimReply(Struct):
    report: Report
    jobs: list[ClaimedJob]
    wake_at: float | None = None  # the earliest a deferred job comes due, if nothing did


class CommitRequest(Struct):
    """``commit``: commit *results* (a released attempt is one with outcome ``released``)."""

    results: list[Attempt]


class RenewRequest(Struct):
    """``renew``: extend leases, ``[job_id, attempt, seconds]`` each."""

    leases: list[tuple[JobId, int, Seconds]]


class RenewReply(Struct):
    kept: list[int]  # the job ids whose lease this pipeline still holds


class LapsedRequest(Struct):
    """``lapsed``: running jobs of the pipeline's tasks whose lease lapsed without a
    commit; the pipeline commits each as a failed attempt (error type ``lost``)."""

    limit: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 100


class LapsedJob(Struct):
    job: ClaimedJob
    owner: str | None


class LapsedReply(Struct):
    jobs: list[LapsedJob]


class ItemRequest(Struct):
    """``item``: an item through any alias (reply: the item, or null)."""

    id: Text


class MetadataRequest(Struct):
    """``metadata``: a task's stored result for an item (reply: an object, or null)."""

    task: Name
    id: Text


class PingRequest(Struct):
    """``ping``, every ``ping_every`` seconds: what the pipeline is doing."""

    in_use: Count = 0
    disk_free: Annotated[int, msgspec.Meta(ge=0)] | None = None
    disk_total: Annotated[int, msgspec.Meta(ge=0)] | None = None


class PingReply(Struct):
    time: float


class ClockRequest(Struct):
    """``clock``: the tracker's time, read at once (no database), so the pipeline can
    measure its clock against the tracker's: permits and due times are in the tracker's."""


# -- crawling (trawl worker --crawl): the tracker grants politeness permits ---------------------


# The most a request may be begun ahead of its start (crawl.begin's lead), and a moved start
# lie ahead of the tracker's now (crawl.pace's lead).
LEAD_MAX = 1.0


class CrawlBeginRequest(Struct):
    """``crawl.begin``: plan the attempt at a page the pipeline holds (its job's lease):
    fetch (from ``start_at``), robots.txt first, defer, skip or park. *finished*: requests
    done since the last one, whose politeness slots are freed. *lead*: how long before its
    start the pipeline begins the request, to have its connection by then; a start that
    much further off is still waited for, and a page put aside is woken that much earlier."""

    crawl: JobId
    url: Text
    item_id: Text
    attempt: Annotated[int, msgspec.Meta(ge=1)]
    finished: list[tuple[Text, int]] = []
    lead: Annotated[float, msgspec.Meta(ge=0, le=LEAD_MAX)] = 0.0


class CrawlPlan(Struct):
    """What to do with a page now. Times are the tracker's clock."""

    action: Literal["fetch", "robots", "skip", "defer", "park"]
    crawl: JSONObject | None = None  # the crawl as stored (id, seeds, depth_limit, options, ...)
    ruleset: int | None = None  # its rules' version, and the rules
    rules: list[JSONObject] = []
    settings: JSONObject | None = None  # what the rules say of this URL
    start_at: float = 0.0
    until: float = 0.0
    reason: str = ""
    host_errors: int = 0
    delay: float = 0.0  # fetch/robots: the host's delay (Crawl-delay included), for crawl.pace


class RobotsRequest(Struct):
    """``crawl.robots``: a host's robots.txt as fetched, kept for every fetcher; frees the
    fetch's slot; the host's next request not before *not_before*."""

    host: Name
    status: int
    body: Annotated[str, msgspec.Meta(max_length=1 << 20)]
    not_before: float
    item_id: Text
    attempt: Annotated[int, msgspec.Meta(ge=1)]


class BlockRequest(Struct):
    """``crawl.block``: hold off every request to *host* until *until* (a 429)."""

    host: Name
    until: float


class HostFailedRequest(Struct):
    """``crawl.host_failed``: a 5xx, timeout or connection error on *host*, at the page
    *url* of crawl *crawl* (without them, every error counts as the host's)."""

    host: Name
    grace: Seconds
    crawl: JobId | None = None
    url: Text | None = None


class HostFailedReply(Struct):
    until: float | None  # the page waits until then without spending a try; null: it counts


class PaceRequest(Struct):
    """``crawl.pace``: a start on *host* for a browser page's sub-request, or for a request
    that missed its start *after*, *delay* after the host's last one. A missed start on
    which no later one was reserved moves to the tracker's now plus *lead*."""

    host: Name
    delay: Seconds
    after: float | None = None  # the tracker's clock
    lead: Annotated[float, msgspec.Meta(ge=0, le=LEAD_MAX)] = 0.0


class PaceReply(Struct):
    start: float | None  # the tracker's clock; null: the host is blocked


class PayloadsRequest(Struct):
    """``crawl.payloads``: the crawl's archived payloads, for revisit records; with a
    ``digest``, only that payload's first copy (if there is one)."""

    crawl: JobId
    digest: str | None = None


class PayloadsReply(Struct):
    payloads: dict[str, tuple[str, str]]  # digest -> (url, WARC-Date) of the first copy


REQUESTS: dict[str, tuple[type[Struct], Any]] = {
    "claim": (ClaimRequest, ClaimReply),
    "commit": (CommitRequest, Report),
    "renew": (RenewRequest, RenewReply),
    "lapsed": (LapsedRequest, LapsedReply),
    "item": (ItemRequest, Any),
    "metadata": (MetadataRequest, Any),
    "ping": (PingRequest, PingReply),
    "clock": (ClockRequest, PingReply),
    "crawl.begin": (CrawlBeginRequest, CrawlPlan),
    "crawl.robots": (RobotsRequest, Any),
    "crawl.block": (BlockRequest, Any),
    "crawl.host_failed": (HostFailedRequest, HostFailedReply),
    "crawl.payloads": (PayloadsRequest, PayloadsReply),
    "crawl.pace": (PaceRequest, PaceReply),
}

ADVISORIES: dict[str, Any] = {
    "welcome": Welcome,
    "drain": None,  # finish what you hold, claim nothing more
    "undrain": None,  # claim again
    "routing": Welcome,  # tags, match-only or slots changed: what may be claimed now
    "revoked": None,  # the token was rotated or the pipeline deleted: the socket closes
    "disconnect": None,  # an operator asked: the socket closes (reconnecting is allowed)
    "rules": None,  # a crawl's rules changed (payload: {"crawl", "version"})
}
