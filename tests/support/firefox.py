"""Drives headless Firefox over Marionette, its own remote protocol, with the standard library.

Marionette speaks JSON over TCP, each message prefixed by its length in bytes and a colon:
commands are `[0, id, name, parameters]`, answers `[1, id, error, result]`. Firefox listens on
127.0.0.1 at a port it picks (`marionette.port` 0) and writes that port into its profile.
"""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

FIREFOX = shutil.which("firefox-esr") or shutil.which("firefox") or "/usr/bin/firefox-esr"
TIMEOUT_S = 60


class Firefox:
    def __init__(self):
        self.profile = tempfile.mkdtemp(prefix="avaprep-firefox-")
        with open(os.path.join(self.profile, "user.js"), "w") as prefs:
            prefs.write('user_pref("marionette.port", 0);\n')
            prefs.write('user_pref("media.autoplay.default", 0);\n')
        self.process = subprocess.Popen(
            [FIREFOX, "--headless", "--marionette", "--no-remote", "--profile", self.profile],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.connection = None
        self.buffer = b""
        self.next_id = 0
        try:
            self.connection = self._connect()
            self._receive()  # Firefox's greeting: its protocol's name and version
            self.send("WebDriver:NewSession", {})
            self.send("WebDriver:SetTimeouts", {"script": TIMEOUT_S * 1000})
        except BaseException:
            self.close()
            raise

    def _connect(self):
        """Connects to the port Firefox writes into its profile once it listens."""
        written = os.path.join(self.profile, "MarionetteActivePort")
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"Firefox exited with {self.process.returncode} before listening")
            try:
                with open(written) as file:
                    port = int(file.read().strip())
                # Longer than a script may run, so a slow script answers before the socket gives up.
                return socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S + 30)
            except (FileNotFoundError, ValueError, ConnectionRefusedError):
                time.sleep(0.1)
        raise TimeoutError("Firefox did not start Marionette within %d s" % TIMEOUT_S)

    def _receive(self):
        while True:
            length, colon, rest = self.buffer.partition(b":")
            if colon and len(rest) >= int(length):
                self.buffer = rest[int(length):]
                return json.loads(rest[: int(length)])
            chunk = self.connection.recv(1 << 16)
            if not chunk:
                raise RuntimeError("Firefox closed the Marionette connection")
            self.buffer += chunk

    def send(self, command, parameters=None):
        self.next_id += 1
        body = json.dumps([0, self.next_id, command, parameters or {}]).encode()
        self.connection.sendall(str(len(body)).encode() + b":" + body)
        while True:
            answer = self._receive()
            if answer[0] == 1 and answer[1] == self.next_id:
                if answer[2]:
                    raise RuntimeError(f"Marionette {command}: {answer[2]}")
                return answer[3]

    def open_url(self, url):
        """Loads URL."""
        self.send("WebDriver:Navigate", {"url": url})

    def run_async(self, script, args):
        """Runs SCRIPT in the page with ARGS; it ends by calling its last argument with the result."""
        return self.send("WebDriver:ExecuteAsyncScript", {"script": script, "args": args})["value"]

    def close(self):
        if self.connection:
            try:
                self.send("Marionette:Quit", {"flags": ["eForceQuit"]})
            except (RuntimeError, OSError):
                pass
            self.connection.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.profile, ignore_errors=True)
