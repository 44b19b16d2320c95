"""Issue 40: every example of the README runs, so the README cannot drift from the code.

The README's ``sh`` blocks run in bash as written, in order, one shell per section (a
section's blocks share its variables, as a reader's terminal does), with its ``python``
blocks written to the file the text before them names (``hello.py``). A block that
cannot run says so on its first line, ``# not run by tests/acceptance/test_readme.py:
REASON``, visible to a reader too; :data:`NOT_RUN` lists them, so a new block is run or
consciously marked.

What the runner changes, and only this:
* the node's default address (127.0.0.1:50051) is a free port, given through
  ``TICKWHEEL_LISTEN`` and ``TICKWHEEL_TARGET`` (both documented in the README's table);
  the two-regions section's literal ``127.0.0.1:50051``/``50052`` become free ports;
* the placeholder DSNs (``postgresql://user:password@localhost:5432/tickwheel``,
  ``postgresql://…/us``, ``postgresql://…/eu``) become the harness's databases;
* a command that runs until stopped without ``&`` (``.venv/bin/tickwheel dev``) is
  started in the background, as the reader's second terminal;
* ``make`` runs in the repository (the shell runs in a scratch directory, where
  ``.venv`` is the repository's), so nothing the examples write lands in the checkout;
* after a section, a check the README's comments promise (the task COMPLETED).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
from pathlib import Path

import pytest

from tests.support.processes import REPO_ROOT
from tests.support.servers import PostgresServer, free_port

README = REPO_ROOT / "README.md"
MARK = "# not run by tests/acceptance/test_readme.py: "

NOT_RUN = {
    "The two commands": "make test runs that test",
    "More commands": "a synopsis",
}
"""Sections with a block that is not run, and the words its reason must say."""

RUN = ("Embedded, in one command", "On PostgreSQL, step by step", "More commands", "Two regions")
"""The sections whose blocks run (each by one test below)."""

README_DSN = "postgresql://user:password@localhost:5432/tickwheel"


@dataclasses.dataclass(frozen=True)
class Block:
    lang: str
    text: str
    section: str
    before: str
    """The text between the previous block (or heading) and this one."""


def readme_blocks() -> list[Block]:
    out: list[Block] = []
    section, before, lang, body = "", [], None, []
    for line in README.read_text().splitlines():
        if lang is not None:
            if line.startswith("```"):
                out.append(Block(lang, "\n".join(body) + "\n", section, "\n".join(before)))
                lang, body, before = None, [], []
            else:
                body.append(line)
        elif line.startswith("```"):
            lang = line[3:].strip()
        elif line.startswith("#"):
            section, before = line.lstrip("#").strip(), []
        else:
            before.append(line)
    assert lang is None, "an unclosed ``` block"
    return [b for b in out if b.lang in ("sh", "python")]


def _not_run(block: Block) -> str | None:
    first = block.text.splitlines()[0]
    return first[len(MARK) :] if first.startswith(MARK) else None


def test_every_example_is_run_or_says_why_not() -> None:
    blocks = readme_blocks()
    assert len(blocks) >= 8
    marked = {b.section: _not_run(b) for b in blocks if _not_run(b) is not None}
    assert set(marked) == set(NOT_RUN), marked
    for section, reason in marked.items():
        assert reason is not None
        assert NOT_RUN[section] in reason
        assert len(reason.split()) >= 8, f"{section}: say why it is not run: {reason!r}"
    for b in blocks:
        if _not_run(b) is None:
            assert b.section in RUN, f"a README block no test runs, under {b.section!r}"
    for b in blocks:
        if b.lang == "python":
            assert _python_file(b) == "hello.py"


def _python_file(block: Block) -> str:
    m = re.search(r"put this in `([\w./-]+\.py)`", block.before)
    assert m, f"a python block whose text names no file to put it in: {block.before!r}"
    return m.group(1)


def _section(*sections: str) -> list[Block]:
    return [b for b in readme_blocks() if b.section in sections and _not_run(b) is None]


_FOREGROUND = re.compile(r"^(?P<cmd>\S*tickwheel (dev|serve|worker)\b[^#&]*?)(?P<rest>\s*(#.*)?)$")


def _script(blocks: list[Block], subs: dict[str, str], check: str) -> str:
    """One bash script: the blocks in order (python blocks as files), then ``check``."""
    lines = [
        "set -euo pipefail",
        "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT",
        'make() { command make -C "$TICKWHEEL_REPO" "$@"; }',
        "set -x",
    ]
    for b in blocks:
        text = b.text
        for old, new in subs.items():
            text = text.replace(old, new)
        if b.lang == "python":
            lines += [f"cat > {_python_file(b)} <<'README_PY'", text.rstrip("\n"), "README_PY"]
            continue
        for line in text.splitlines():
            m = _FOREGROUND.match(line)
            if m and not line.split("#")[0].rstrip().endswith("&"):
                line = f"{m['cmd'].rstrip()} &{m['rest']}"
            lines.append(line)
    lines += ["set +x", check]
    return "\n".join(lines) + "\n"


async def _run(script: str, cwd: Path, env: dict[str, str]) -> str:
    (cwd / "readme.sh").write_text(script)
    (cwd / ".venv").symlink_to(REPO_ROOT / ".venv")
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "readme.sh",
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 180)
    except TimeoutError:
        os.killpg(proc.pid, 9)
        raise
    text = out.decode(errors="replace")
    assert proc.returncode == 0, f"the README's commands failed:\n{script}\n---\n{text}"
    assert "Traceback" not in text, text
    return text


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TICKWHEEL_", "PYTHON"))}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"  # the README puts tickwheel on PATH itself
    env["TICKWHEEL_REPO"] = str(REPO_ROOT)
    env.update(extra)
    return env


# A bounded poll in the shell itself (the reader runs `tickwheel get` again).
_COMPLETED = """
for _ in $(seq 600); do
  tickwheel get {task} {flags} | grep -q COMPLETED && break
  sleep 0.1
done
tickwheel get {task} {flags} | tee /dev/stderr | grep -q 'COMPLETED'
"""


async def test_the_embedded_steps(tmp_path: Path) -> None:
    port = free_port()
    address = f"127.0.0.1:{port}"
    check = """
CREDENTIALS=.tickwheel/dev.db.credentials.json
for _ in $(seq 600); do [ -s $CREDENTIALS ] && break; sleep 0.1; done
KEY=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["api_key"])' $CREDENTIALS)
.venv/bin/tickwheel submit hello --api-key "$KEY" --in 3600 --json
.venv/bin/tickwheel list --api-key "$KEY" | grep -q hello
"""
    out = await _run(
        _script(_section("Embedded, in one command"), {}, check),
        tmp_path,
        _env(TICKWHEEL_LISTEN=address, TICKWHEEL_TARGET=address),
    )
    assert f'"target": "{address}"' in out or address in out


async def test_the_postgresql_steps_and_more_commands(tmp_path: Path, pg_empty_dsn: str) -> None:
    port = free_port()
    address = f"127.0.0.1:{port}"
    check = _COMPLETED.format(task="$TASK_ID", flags="") + (
        "tickwheel history $TASK_ID | grep DISPATCHED | grep -q 'due '\n"
        # A second acme is refused (issue 40).
        "if tickwheel tenants create acme 2> again.err; then exit 1; fi\n"
        "grep -qx \"Error: tenant named 'acme' already exists\" again.err\n"
    )
    out = await _run(
        _script(
            _section("On PostgreSQL, step by step", "More commands"),
            {README_DSN: pg_empty_dsn},
            check,
        ),
        tmp_path,
        _env(TICKWHEEL_LISTEN=address, TICKWHEEL_TARGET=address),
    )
    assert "tickwheel " in out  # --version
    assert (tmp_path / "hello.py").exists()


async def test_two_regions(
    tmp_path: Path, postgres_server: PostgresServer, pg_template: str, pg_dsn: str
) -> None:
    us, eu = free_port(), free_port()
    name = f"readme_eu_{us}"
    owner = postgres_server.app_user
    postgres_server.psql(f"CREATE DATABASE {name} TEMPLATE {pg_template} OWNER {owner}")
    try:
        subs = {
            "127.0.0.1:50051": f"127.0.0.1:{us}",
            "127.0.0.1:50052": f"127.0.0.1:{eu}",
            "postgresql://…/us": pg_dsn,
            "postgresql://…/eu": postgres_server.app_dsn(name),
        }
        blocks = [
            *[b for b in _section("On PostgreSQL, step by step") if b.lang == "python"],
            *_section("Two regions"),
        ]
        check = (
            "for _ in $(seq 600); do\n"
            f"  tickwheel list --target 127.0.0.1:{eu} | grep -q COMPLETED && break\n"
            "  sleep 0.1\n"
            "done\n"
            f"tickwheel list --target 127.0.0.1:{eu} | tee /dev/stderr | grep -q COMPLETED\n"
        )
        await _run(
            _script(blocks, subs, check),
            tmp_path,
            _env(
                # As above (the PostgreSQL section): tickwheel on PATH, the admin token;
                # the default target, 127.0.0.1:50051, is the us node's free port.
                PATH=f"{REPO_ROOT / '.venv' / 'bin'}:/usr/local/bin:/usr/bin:/bin",
                TICKWHEEL_ADMIN_TOKEN="readme-admin-token-0123456789",
                TICKWHEEL_TARGET=f"127.0.0.1:{us}",
            ),
        )
    finally:
        postgres_server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.mark.parametrize("section", RUN)
def test_each_run_section_has_blocks(section: str) -> None:
    assert _section(section), f"no runnable block under {section!r}"
