"""Trust boundaries: each test is an attack that got through once (docs/security.md)."""
