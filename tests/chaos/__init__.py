"""Fleet faults on hosts made with ip netns and veth: partitions, frozen processes, restarts
(docs/operations.md)."""
