"""Plain typed records and states: no I/O."""
