"""The browser view in a real browser: headless Chromium (Debian's package; never a downloaded
build) drives the real ``ollama-mcp ui`` process while an MCP client works on the same store.
Screenshots of each page go to test-artifacts/ui/."""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client
from playwright.async_api import Browser, Page, async_playwright

from ollama_mcp.config import Settings
from tests.conftest import connect
from tests.support.fake_ollama import FakeOllama
from tests.support.http import ServeProcess, cli, environment
from tests.support.http import client as http_client
from tests.support.mcp_client import call
from tests.support.stdio import SCRIPT

pytestmark = pytest.mark.anyio

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "ui"


@pytest.fixture
def chromium() -> str:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing: .ci/run installs Debian's chromium package before the tests")
        pytest.skip("Debian's chromium package is not installed (apt-get install chromium)")
    return CHROMIUM


@contextmanager
def ui_process(database: str, fake: FakeOllama) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The real ``ollama-mcp ui --port 0`` on ``database``, and the link it printed."""
    env = {"PATH": os.environ.get("PATH", ""), "OLLAMA_MCP_DB": database, "OLLAMA_HOST": fake.url}
    proc = subprocess.Popen([str(SCRIPT), "ui", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd="/")
    try:
        assert proc.stdout is not None
        lines: queue.Queue[str] = queue.Queue()
        def read_lines() -> None:
            for line in proc.stdout or ():
                lines.put(line)

        threading.Thread(target=read_lines, daemon=True).start()
        printed = ""
        while "token=" not in printed:  # the link comes once the store is open
            try:
                printed += lines.get(timeout=30)
            except queue.Empty:
                break
        found = re.search(r"http://127\.0\.0\.1:\d+/\?token=[\w-]+", printed)
        assert found, printed + (proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        yield proc, found.group(0)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@asynccontextmanager
async def browser(executable: str) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            await launched.close()


async def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


async def contents(client: Client, query: str) -> list[str]:
    found = await call(client, "search_all_conversations", query=query, top_k=10)
    return [hit["content"] for hit in found["results"]]


async def test_a_user_finds_corrects_and_deletes_memories_in_the_browser_and_the_assistant_sees_both(
    settings: Settings, database_url: str, fake_ollama: FakeOllama, chromium: str, backend: str, tmp_path: Path
) -> None:
    async with connect(settings) as client:
        await call(client, "init_conversation", name="Trip planning")
        await call(client, "store_memory", content="Sam prefers window seats on long flights", tags=["travel"])
        await call(client, "store_memory", content="The door code of the Lisbon flat is 4711")

        with ui_process(database_url, fake_ollama) as (proc, link), anyio.fail_after(90):
            async with browser(chromium) as opened:
                page = await opened.new_page(viewport={"width": 1100, "height": 800}, accept_downloads=True)
                page.set_default_timeout(15_000)
                await page.goto(link)
                assert "?token=" not in page.url  # the token left the address bar for a cookie
                await page.get_by_role("link", name="Trip planning").wait_for()
                await shot(page, f"conversations-{backend}")

                await page.get_by_role("link", name="Trip planning").click()
                window = page.locator("li.memory", has_text="window seats")
                await window.wait_for()
                await shot(page, f"conversation-{backend}")

                await page.get_by_role("link", name="Search", exact=True).click()
                await page.locator("input[name=q]").fill("window seats")
                await page.get_by_role("button", name="Search").click()
                first = page.locator("li.result").first
                assert "Sam prefers window seats on long flights" in await first.inner_text()
                assert "keywords: window, seats" in await first.inner_text()
                await shot(page, f"search-{backend}")

                await first.get_by_role("link").click()  # to the memory in its conversation
                window = page.locator("li.memory", has_text="window seats")
                await window.locator("summary", has_text="Edit").click()
                await window.locator("textarea[name=content]").fill("Sam prefers aisle seats on long flights")
                await window.get_by_role("button", name="Save as new version").click()
                await page.get_by_text("Saved as a new version").wait_for()
                aisle = page.locator("li.memory", has_text="aisle seats")
                assert "1 earlier version" in await aisle.inner_text()

                door = page.locator("li.memory", has_text="door code")
                await door.get_by_role("link", name="Delete…").click()
                await page.get_by_text("Delete this memory?").wait_for()
                await shot(page, f"confirm-{backend}")
                await page.get_by_role("button", name="Delete").click()
                await page.get_by_text("The memory was deleted.").wait_for()
                assert await page.locator("li.memory", has_text="door code").count() == 0

                async with page.expect_download() as download_info:
                    await page.get_by_role("link", name="Export Markdown").click()
                download = await download_info.value
                saved = tmp_path / download.suggested_filename
                await download.save_as(saved)
                exported = saved.read_text(encoding="utf-8")
                assert "Sam prefers aisle seats on long flights" in exported and "4711" not in exported

                await page.get_by_role("link", name="Health").click()
                await page.locator("svg.plot").wait_for()
                await shot(page, f"health-{backend}")

        # The assistant's next searches, through MCP, reflect both changes.
        assert (await contents(client, "which seats does Sam prefer"))[0] == "Sam prefers aisle seats on long flights"
        assert "Sam prefers window seats on long flights" not in await contents(client, "window seats")
        assert not [c for c in await contents(client, "door code Lisbon flat") if "4711" in c]
    logged = proc.stderr.read() if proc.stderr else ""
    assert "aisle" not in logged and "4711" not in logged and "window" not in logged, logged


async def test_on_a_shared_server_a_person_signs_in_by_token_and_finds_only_their_memory(
    settings: Settings, chromium: str, backend: str
) -> None:
    env = environment(settings)
    alice, bob = (cli(env, "token", "create", name).stdout.strip() for name in ("alice", "bob"))
    server = ServeProcess(env)
    try:
        async with http_client(server.url, alice) as mcp:
            await call(mcp, "init_conversation", name="Alice's garden")
            await call(mcp, "store_memory", content="Water the tomatoes every second day")
        async with http_client(server.url, bob) as mcp:
            bobs = (await call(mcp, "init_conversation", name="Bob's salary talk"))["conversation_id"]
        view = server.url.removesuffix("/mcp") + "/ui/"
        with anyio.fail_after(90):
            async with browser(chromium) as opened:
                page = await opened.new_page(viewport={"width": 1100, "height": 800})
                page.set_default_timeout(15_000)
                await page.goto(view)
                await page.get_by_label("Your token").fill(alice)
                await shot(page, f"sign-in-{backend}")
                await page.get_by_role("button", name="Sign in").click()
                await page.get_by_role("link", name="Alice's garden").wait_for()
                assert "Bob's salary talk" not in await page.content()
                await page.get_by_role("link", name="Alice's garden").click()
                await page.locator("li.memory", has_text="tomatoes").wait_for()
                missing = await page.goto(f"{view}conversations/{bobs}")
                assert missing is not None and missing.status == 404
                assert "Bob's salary talk" not in await page.content()
    finally:
        code, err = server.stop()
    assert code == 130 and "tomatoes" not in err, err


async def test_an_imported_chat_shows_its_own_times_sorts_as_history_and_is_found_plainly(
    database_url: str, fake_ollama: FakeOllama, chromium: str, backend: str, tmp_path: Path
) -> None:
    from tests.support.chats import chatgpt_conversation  # noqa: PLC0415

    export = tmp_path / "conversations.json"
    export.write_text(json.dumps([chatgpt_conversation()]))
    env = {"PATH": os.environ.get("PATH", ""), "OLLAMA_MCP_DB": database_url, "OLLAMA_HOST": fake_ollama.url,
           "HOME": str(tmp_path)}
    imported = subprocess.run([str(SCRIPT), "import", str(export)], capture_output=True, text=True, env=env,
                              cwd="/", timeout=120)
    assert imported.returncode == 0, imported.stderr
    settings = Settings.from_env(env)
    async with connect(settings) as client:
        await call(client, "init_conversation", name="Today's chat")
        await call(client, "store_memory", content="Groceries: oat milk and lemons")

    with ui_process(database_url, fake_ollama) as (_, link), anyio.fail_after(90):
        async with browser(chromium) as opened:
            page = await opened.new_page(viewport={"width": 1100, "height": 800})
            page.set_default_timeout(15_000)
            await page.goto(link)
            rows = page.locator("table tbody tr")
            await rows.first.wait_for()
            listed = [await rows.nth(i).inner_text() for i in range(await rows.count())]
            assert "Today's chat" in listed[0] and "Lisbon trip" in listed[1]  # the import is 2023's history
            assert "2023-11-14 22:14" in listed[1]  # its last activity: its newest turn's own time

            await page.get_by_role("link", name="Lisbon trip").click()
            turns = page.locator("ol.transcript li")
            await turns.first.wait_for()
            said = [await turns.nth(i).inner_text() for i in range(await turns.count())]
            assert ["2023-11-14 22:13" in said[0], "2023-11-14 22:14" in said[3]] == [True, True], said
            await shot(page, f"imported-{backend}")

            await page.get_by_role("link", name="Search", exact=True).click()
            await page.locator("input[name=q]").fill("Alfama hotel")
            await page.get_by_role("button", name="Search").click()
            first = page.locator("li.result").first
            await first.wait_for()
            assert "The Alfama hotel, three nights." in await first.inner_text()
            assert "2023-11-14 22:14" in await first.inner_text()


async def test_changed_facts_are_listed_in_the_browser_and_one_click_undoes_a_supersession(
    settings: Settings, database_url: str, fake_ollama: FakeOllama, chromium: str, backend: str,
) -> None:
    async with connect(settings) as client:
        await call(client, "store_memory", content="Maren lives in Berlin.", occurred_at="2024-01-10T09:00:00Z")
        await call(client, "store_memory", content="Maren moved to Lisbon.", occurred_at="2025-03-02T09:00:00Z")
        await call(client, "store_memory", content="Maren lives in Oslo.", occurred_at="2025-06-01T12:00:00Z")
        await call(client, "store_memory", content="Maren lives in Bergen.", occurred_at="2025-06-01T12:00:00Z")
        with ui_process(database_url, fake_ollama) as (_, link), anyio.fail_after(90):
            async with browser(chromium) as opened:
                page = await opened.new_page(viewport={"width": 1100, "height": 800})
                page.set_default_timeout(15_000)
                await page.goto(link)
                await page.get_by_role("link", name="Changed facts").click()
                conflict = page.locator("#to-review li.change")
                assert await conflict.count() == 1  # Oslo and Bergen, said at the same moment
                assert "conflict to review" in await conflict.inner_text()
                moved = page.locator("#recent li.change", has_text="Maren moved to Lisbon.").filter(
                    has_text="Maren lives in Berlin.")
                assert "'lisbon'" in await moved.inner_text()
                await shot(page, f"changes-{backend}")
                await moved.get_by_role("button", name="Undo").click()
                await page.get_by_text("Undone: the older statement holds again").wait_for()
                assert "undone" in await page.locator("#recent li.change", has_text="Maren lives in Berlin.").filter(
                    has_text="Maren moved to Lisbon.").inner_text()
        found = await call(client, "search_all_conversations", query="Maren Berlin", top_k=10)
        berlin = next(r for r in found["results"] if r["content"] == "Maren lives in Berlin.")
        assert berlin.get("superseded_by") is None
