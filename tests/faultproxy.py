"""A TCP proxy to the test PostgreSQL server that cuts one connection at a chosen moment.

It listens on 127.0.0.1 only and reads the PostgreSQL wire protocol from the client (without
TLS: connect with ``sslmode=disable``, and without prepared statements: ``prepare_threshold``
None, so every statement travels as a Parse message carrying its text). ``arm(fault)`` makes
the next write transaction through it lose its connection at one point:

``before_commit``
    the client's COMMIT never reaches the server (which then rolls back);
``after_commit``
    the server commits, and its reply is lost: the client cannot know the outcome;
``mid_pipeline``
    the server runs the first ``INSERT INTO items`` and the connection dies with its reply.

Each arming cuts one connection; ``refuse`` makes it turn every new connection away (the
server unreachable); ``silence`` makes every connection open through it go quiet both ways
(a server that stops answering, its host hung) while new ones still pass (a cancel request
still reaches the server). Threads are daemons, and ``close`` stops them all.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from typing import Literal

Fault = Literal["before_commit", "after_commit", "mid_pipeline"]

_COMMIT_DONE = b"C" + struct.pack("!I", 4 + len(b"COMMIT\0")) + b"COMMIT\0"


class _Link:
    """One client connection and its server connection."""

    def __init__(self, proxy: FaultProxy, client: socket.socket, server: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        self.in_write = False  # the transaction began with a plain BEGIN
        self.cut_on_reply: bytes | None = None  # cut when the server's reply holds this
        self.dead = False
        self.silent = False  # nothing passes either way (but the sockets stay open)

    def cut(self) -> None:
        self.dead = True
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def client_to_server(self) -> None:
        buffer = b""
        started = False  # past the untyped startup message
        try:
            while not self.dead:
                chunk = self.client.recv(65536)
                if not chunk:
                    break
                if self.silent:
                    continue
                buffer += chunk
                out = b""
                while True:
                    if not started:
                        if len(buffer) < 4:
                            break
                        size = struct.unpack("!I", buffer[:4])[0]
                        if len(buffer) < size:
                            break
                        out, buffer, started = out + buffer[:size], buffer[size:], True
                        continue
                    if len(buffer) < 5:
                        break
                    size = struct.unpack("!I", buffer[1:5])[0]
                    if len(buffer) < 1 + size:
                        break
                    message, buffer = buffer[: 1 + size], buffer[1 + size :]
                    if message[:1] == b"P" and self.on_parse(message):
                        self.server.sendall(out)
                        self.cut()
                        return
                    out += message
                self.server.sendall(out)
        except OSError:
            pass
        if not self.dead:
            self.cut()

    def on_parse(self, message: bytes) -> bool:
        """Note a statement the client sends; True to cut the connection before it."""
        name_end = message.index(b"\0", 5)
        query = message[name_end + 1 : message.index(b"\0", name_end + 1)].decode().strip()
        if query.startswith("BEGIN"):
            self.in_write = query == "BEGIN"
            return False
        if not self.in_write:
            return False
        if query == "COMMIT":
            fault = self.proxy.take(("before_commit", "after_commit"))
        elif query.startswith("INSERT INTO items"):
            fault = self.proxy.take(("mid_pipeline",))
        else:
            return False
        if fault == "before_commit":
            self.proxy.fire()
            return True
        if fault == "after_commit":
            self.cut_on_reply = _COMMIT_DONE
        elif fault == "mid_pipeline":
            self.cut_on_reply = b""  # whatever the server answers next
        return False

    def server_to_client(self) -> None:
        tail = b""
        try:
            while not self.dead:
                chunk = self.server.recv(65536)
                if not chunk:
                    break
                if self.silent:
                    continue
                if self.cut_on_reply is not None and self.cut_on_reply in tail + chunk:
                    self.proxy.fire()
                    self.cut()
                    return
                tail = chunk[-16:]
                self.client.sendall(chunk)
        except OSError:
            pass
        if not self.dead:
            self.cut()


class FaultProxy:
    """A proxy on 127.0.0.1 to ``host:port``; use as a context manager."""

    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self._lock = threading.Lock()
        self._armed: Fault | None = None
        self._links: list[_Link] = []
        self.fired = 0
        self.refuse = False
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="fault-proxy", daemon=True)
        self._thread.start()

    def url(self, dbname: str, user: str) -> str:
        return (
            f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}?sslmode=disable&gssencmode=disable"
        )

    def arm(self, fault: Fault) -> None:
        """Cut the next write transaction that reaches the fault's moment (once)."""
        with self._lock:
            self._armed = fault

    def take(self, faults: tuple[Fault, ...]) -> Fault | None:
        """The armed fault, disarmed, if it is one of ``faults``."""
        with self._lock:
            fault = self._armed
            if fault not in faults:
                return None
            self._armed = None
            return fault

    def silence(self) -> None:
        """Let nothing more pass on the connections open now, either way."""
        with self._lock:
            for link in self._links:
                link.silent = True

    def fire(self) -> None:
        with self._lock:
            self.fired += 1

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self.refuse:
                client.close()
                continue
            try:
                server = socket.create_connection(self._upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            link = _Link(self, client, server)
            with self._lock:
                self._links.append(link)
            for pump in (link.client_to_server, link.server_to_client):
                threading.Thread(target=pump, name="fault-proxy-pump", daemon=True).start()

    def close(self) -> None:
        """Stop accepting and cut every connection still open."""
        self._stop.set()
        self._listener.close()
        self._thread.join()
        with self._lock:
            links = list(self._links)
        for link in links:
            if not link.dead:
                link.cut()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
