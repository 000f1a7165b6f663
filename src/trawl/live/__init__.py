"""trawl.live: actors, conversations, sentinels, a service registry, a cluster over
RabbitMQ, shared state and WebSocket sessions. It knows nothing of items or SQL; the server
builds its live parts (remote pipelines, the dashboard's updates) on it. See docs/live.md.
"""

from trawl.live.actor import Actor, action, daemon
from trawl.live.amqp import AmqpTransport
from trawl.live.asgi import LiveApp
from trawl.live.bucket import TokenBucket
from trawl.live.conversation import Conversation
from trawl.live.errors import (
    ActorStopped,
    AskTimeout,
    BadAddress,
    KeyInvalid,
    LiveError,
    NodeLost,
    NoSuchActor,
    RemoteError,
    SchemaError,
    UnknownAction,
)
from trawl.live.frames import Sentinel
from trawl.live.kv import MemoryMap, RedisMap, SharedMap
from trawl.live.node import Node
from trawl.live.session import Session
from trawl.live.transport import Loopback, MemoryHub, Transport

__all__ = [
    "Actor",
    "ActorStopped",
    "AmqpTransport",
    "AskTimeout",
    "BadAddress",
    "Conversation",
    "KeyInvalid",
    "LiveApp",
    "LiveError",
    "Loopback",
    "MemoryHub",
    "MemoryMap",
    "NoSuchActor",
    "Node",
    "NodeLost",
    "RedisMap",
    "RemoteError",
    "SchemaError",
    "Sentinel",
    "Session",
    "SharedMap",
    "TokenBucket",
    "Transport",
    "UnknownAction",
    "action",
    "daemon",
]
