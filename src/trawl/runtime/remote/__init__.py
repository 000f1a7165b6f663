"""A worker on another machine: claims and commits through a tracker server's WebSocket
(``trawl worker APP --server ws://HOST:PORT --pipeline ID --token TOKEN``)."""
