"""The two ways ``OllamaClient`` reaches Ollama, against the fake server's real wire format: the
lean HTTP/1.1 client (``json_http``, for embeddings and model descriptions on a plain-HTTP host)
and the ``ollama`` client (everything else, and every call with ``lean=False``). Each test runs
both ways and expects the same outcome."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator

import anyio
import pytest

from ollama_mcp.errors import InputTooLongError, OllamaModelError, OllamaUnavailableError
from ollama_mcp.ollama.client import OllamaClient
from ollama_mcp.ollama.json_http import Base, JsonHttp, parse_host, usable_for
from tests.support.fake_ollama import CHUNKING_BYTES, FakeModel, FakeOllama

pytestmark = pytest.mark.anyio

MODEL = "nomic-embed-text"


@pytest.fixture(params=["lean", "ollama"])
async def client(request: pytest.FixtureRequest, fake_ollama: FakeOllama) -> AsyncIterator[OllamaClient]:
    made = OllamaClient(fake_ollama.url, timeout=2.0, connect_timeout=1.0, lean=request.param == "lean")
    yield made
    await made.aclose()


async def test_embeddings_and_model_descriptions_come_back_whole_from_chunked_replies(
    client: OllamaClient, fake_ollama: FakeOllama
) -> None:
    texts = ["the deploy key lives in the vault", "tea with lemon", "x " * 300]
    vectors = await client.embed(MODEL, texts)
    info = await client.show(MODEL)
    assert vectors == [fake_ollama.vector(MODEL, t) for t in texts]
    assert len(json.dumps({"embeddings": vectors})) > CHUNKING_BYTES  # the fake framed it in chunks
    assert (info.context_length, info.embedding_length, info.capabilities) == (2048, 256, ("embedding",))
    assert [r.body["input"] for r in fake_ollama.embed_requests()] == [texts]
    assert fake_ollama.embed_requests()[0].body["truncate"] is False


async def test_the_lean_path_reuses_one_connection_and_imports_neither_ollama_nor_httpx(
    fake_ollama: FakeOllama,
) -> None:
    script = (
        "import sys, anyio\n"
        "from ollama_mcp.ollama.client import OllamaClient\n"
        "async def main():\n"
        f"    c = OllamaClient({fake_ollama.url!r}, timeout=5, connect_timeout=1)\n"
        f"    for _ in range(3): await c.embed({MODEL!r}, ['one text'])\n"
        f"    print((await c.show({MODEL!r})).embedding_length, 'ollama' in sys.modules, 'httpx' in sys.modules)\n"
        "anyio.run(main)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["256", "False", "False"], out.stderr
    assert fake_ollama.accepted == 1  # all four requests on one kept-alive connection


async def test_a_kept_alive_connection_closed_by_ollama_is_replaced_without_an_error(
    client: OllamaClient, fake_ollama: FakeOllama
) -> None:
    await client.embed(MODEL, ["first"])
    port = fake_ollama.port
    fake_ollama.stop()  # closes the kept-alive connection, as Ollama does with idle ones
    fake_ollama.start()
    assert fake_ollama.port == port
    assert await client.embed(MODEL, ["second"]) == [fake_ollama.vector(MODEL, "second")]


async def test_one_hang_up_is_asked_again_and_two_are_an_error(client: OllamaClient, fake_ollama: FakeOllama) -> None:
    fake_ollama.hang_up = 1
    assert await client.embed(MODEL, ["once"]) == [fake_ollama.vector(MODEL, "once")]
    fake_ollama.hang_up = 2
    with pytest.raises(OllamaUnavailableError, match="sent a reply that could not be read"):
        await client.embed(MODEL, ["twice"])
    assert await client.embed(MODEL, ["after"]) == [fake_ollama.vector(MODEL, "after")]


async def test_a_request_cut_short_never_leaves_its_reply_to_the_next_request(
    client: OllamaClient, fake_ollama: FakeOllama
) -> None:
    fake_ollama.delay = 0.4
    with anyio.move_on_after(0.1) as scope:
        await client.embed(MODEL, ["the slow one"])
    assert scope.cancelled_caught
    fake_ollama.delay = 0.0
    await anyio.sleep(0.5)  # the first reply is sent by now, to a connection that must be closed
    assert await client.embed(MODEL, ["the next one"]) == [fake_ollama.vector(MODEL, "the next one")]


async def test_failures_are_translated_alike_on_both_paths(client: OllamaClient, fake_ollama: FakeOllama) -> None:
    with pytest.raises(OllamaModelError, match="does not have the model 'nomic-embed-txt'.*close: set"):
        await client.embed("nomic-embed-txt", ["a"])
    fake_ollama.models["short"] = FakeModel(context=3)
    with pytest.raises(InputTooLongError):
        await client.embed("short", ["one two three four"])
    fake_ollama.models["chatty"] = FakeModel(capabilities=["completion"])
    with pytest.raises(OllamaModelError, match="cannot compute embeddings"):
        await client.embed("chatty", ["a"])
    fake_ollama.fail = (500, "the text of a memory echoed back")
    with pytest.raises(OllamaUnavailableError, match=r"HTTP 500, an error of 32 characters") as failed:
        await client.embed(MODEL, ["a"])
    assert "memory echoed" not in str(failed.value)
    fake_ollama.fail = None
    fake_ollama.malformed = True
    with pytest.raises(OllamaUnavailableError, match="could not be read"):
        await client.embed(MODEL, ["a"])
    fake_ollama.malformed = False
    fake_ollama.trickle = 0.3
    with pytest.raises(OllamaUnavailableError, match="did not answer within 2 s"):
        await client.embed(MODEL, ["a"])
    fake_ollama.trickle = 0.0
    fake_ollama.stop()
    with pytest.raises(OllamaUnavailableError, match=f"not reachable at {fake_ollama.url}"):
        await client.embed(MODEL, ["a"])


def _raw_server(reply: bytes, times: int) -> socket.socket:
    """A listening socket that answers ``times`` connections with ``reply`` each, then closes them."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        for _ in range(times):
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    return listener


async def test_a_reply_framed_by_the_end_of_the_connection_is_read_whole() -> None:
    """HTTP/1.0-style: no length, no chunks, the connection closes after the body."""
    body = json.dumps({"embeddings": [[0.5] * 600]}).encode()
    listener = _raw_server(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + body, times=2)
    http = JsonHttp(Base("http", "127.0.0.1", listener.getsockname()[1], ""), connect_timeout=1.0)
    try:
        for _ in range(2):  # the second on a new connection: the first could not be kept
            assert await http.request("POST", "/api/embed", {}) == {"embeddings": [[0.5] * 600]}
    finally:
        await http.aclose()
        listener.close()


@pytest.mark.parametrize("embeddings", [[[0.1, "x"]], [[None]], [[[0.1]]], "none", None])
async def test_json_that_is_not_a_list_of_vectors_is_an_unreadable_reply(embeddings: object) -> None:
    body = json.dumps({"embeddings": embeddings} if embeddings is not None else {"model": "m"}).encode()
    listener = _raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body), times=1)
    client = OllamaClient(f"127.0.0.1:{listener.getsockname()[1]}", timeout=2.0, connect_timeout=1.0)
    try:
        with pytest.raises(OllamaUnavailableError, match="sent a reply that could not be read"):
            await client.embed(MODEL, ["a"])
    finally:
        await client.aclose()
        listener.close()


@pytest.mark.parametrize("host", [
    "", "1.2.3.4", ":56789", "1.2.3.4:56789", "http://1.2.3.4", "https://1.2.3.4", "example.com/",
    "example.com:56789/path/", "https://example.com:56789/path", "[0001:002:003:0004::1]",
    "http://[0001:002:003:0004::1]:56789/path",
])
def test_ollama_host_is_read_as_the_ollama_client_reads_it(host: str) -> None:
    from ollama._client import _parse_host  # noqa: PLC0415

    base = parse_host(host)
    assert f"{base.scheme}://{base.host_header}{base.path}" == _parse_host(host)


def test_https_hosts_and_proxied_hosts_keep_the_ollama_client() -> None:
    local = parse_host("127.0.0.1:11434")
    assert usable_for(local, {}) and not usable_for(parse_host("https://ollama.example"), {})
    assert not usable_for(local, {"HTTP_PROXY": "http://proxy:3128"})
    assert usable_for(local, {"HTTP_PROXY": "http://proxy:3128", "NO_PROXY": "127.0.0.1"})


# A fresh interpreter in which the ``ollama`` package's import is held half-way (its module is in
# sys.modules, not yet executed) while a chat call waits for it, and an embedding made meanwhile
# through the lean client finds Ollama unreachable.
_HALF_IMPORTED = '''
import importlib.abc, importlib.machinery, socket, sys, threading
import anyio

executing, release = threading.Event(), threading.Event()

class HeldOllama(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "ollama":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        real = spec.loader
        class Held(importlib.abc.Loader):
            def create_module(self, spec):
                return real.create_module(spec)
            def exec_module(self, module):
                executing.set()
                release.wait(30)
                real.exec_module(module)
        spec.loader = Held()
        return spec

sys.meta_path.insert(0, HeldOllama())

from ollama_mcp.errors import OllamaError
from ollama_mcp.ollama.client import OllamaClient

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    host = f"http://127.0.0.1:{s.getsockname()[1]}"  # closed when the block ends: refused

async def main():
    chat = OllamaClient(host, timeout=5, connect_timeout=1)
    embedder = OllamaClient(host, timeout=5, connect_timeout=1)
    async def chatting():
        try:
            await chat.chat("qwen2.5:3b", [{"role": "user", "content": "hi"}])
        except OllamaError as exc:
            print("chat:", type(exc).__name__, exc)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(chatting)
        await anyio.to_thread.run_sync(executing.wait, 10)
        assert "ollama" in sys.modules, "the import is under way"
        try:
            await embedder.embed("nomic-embed-text", ["a memory"])
        except Exception as exc:
            print("embed:", type(exc).__name__, exc)
        release.set()

anyio.run(main)
'''


def test_an_outage_while_the_ollama_package_is_still_importing_is_reported_as_ollama_unreachable() -> None:
    done = subprocess.run([sys.executable, "-c", _HALF_IMPORTED], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("embed: OllamaUnreachableError Ollama is not reachable at http://127.0.0.1:"), lines
    assert lines[1].startswith("chat: OllamaUnreachableError Ollama is not reachable at http://127.0.0.1:"), lines
