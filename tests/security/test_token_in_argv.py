"""`trawl worker --token` still works but warns that argv is readable (issue 56.15)."""

from __future__ import annotations

from click.testing import CliRunner

from trawl.cli.main import cli

# No --pipeline: the command stops with a usage error after reading its options, so
# nothing connects anywhere.
ARGS = ["worker", "--server", "ws://127.0.0.1:9"]


def test_a_token_given_on_the_command_line_is_warned_about_on_stderr() -> None:
    result = CliRunner().invoke(cli, [*ARGS, "--token", "s3cret"])
    assert result.exit_code == 2
    assert "--token puts the secret in the process list" in result.stderr
    assert "TRAWL_PIPELINE_TOKEN" in result.stderr


def test_a_token_from_the_environment_draws_no_warning() -> None:
    result = CliRunner().invoke(cli, ARGS, env={"TRAWL_PIPELINE_TOKEN": "s3cret"})
    assert result.exit_code == 2
    assert "process list" not in result.stderr
