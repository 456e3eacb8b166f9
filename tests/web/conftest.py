"""Fixtures for the web gateway's tests: a session server, a gateway process with a
users file, and (for the browser tests) one headless Chromium per module."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from groupcomm.tools.procs import LineProcess, ProcessGroup
from groupcomm.web.auth import Users, login_link


class GatewayProcess(LineProcess):
    """``groupcomm web`` on a free port, with users added."""

    def __init__(self, group: ProcessGroup, workdir: Path, *, causality: str = "matrix",
                 session: str = "s", users: tuple[str, ...] = ("ann", "ben", "cat"),
                 extra: tuple[str, ...] = (), http: str = "127.0.0.1:0",
                 tokens: dict[str, str] | None = None) -> None:
        """``http``: where to listen (a restarted gateway on its old port); ``tokens``:
        the users already in ``workdir``'s users file (a restarted gateway keeps them)."""
        assert group.server is not None
        self.users_file = workdir / "users.json"
        self.tokens = tokens if tokens is not None else {
            name: Users(self.users_file).add(name) for name in users}
        self.trace_dir = workdir / "traces"
        super().__init__("gateway", [
            sys.executable, "-m", "groupcomm.web.cli", "--session", session,
            "--server", group.server.address, "--key-file", str(group.key_file),
            "--users", str(self.users_file), "--http", http,
            "--causality", causality, "--trace-dir", str(self.trace_dir), *extra])
        line = self.wait_line(lambda x: x.startswith("listening on "), what="listening line")
        self.url = line.split()[2]
        self.host_port = self.url.split("//", 1)[1]

    def link(self, user: str, page: str) -> str:
        return login_link(self.url, user, self.tokens[user], page)

    def stats(self) -> dict:
        with urllib.request.urlopen(self.url + "/stats", timeout=10) as answer:
            return json.load(answer)

    def stop(self) -> None:
        self.terminate()


@pytest.fixture(scope="module")
def session_group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessGroup]:
    with ProcessGroup(tmp_path_factory.mktemp("web") / "run",
                      server_extra=["--heartbeat-timeout", "3"]) as group:
        yield group


def chromium_paths() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@pytest.fixture(scope="module")
def browser() -> Iterator[BrowserFactory]:
    """Headless Chromium through Selenium: one browser process per module, any number
    of windows (tabs) opened by the test; all closed at the end, also on failure."""
    paths = chromium_paths()
    if paths is None:
        pytest.skip("no chromium and chromedriver here (./run test installs them when "
                    "it runs as root with apt-get)")
    factory = BrowserFactory(*paths)
    try:
        yield factory
    finally:
        factory.quit()


class BrowserFactory:
    """Starts Chromium sessions (each its own window and session storage)."""

    def __init__(self, browser: str, driver: str) -> None:
        self.browser_path = browser
        self.driver_path = driver
        self.drivers: list = []

    def open(self, url: str):  # -> selenium WebDriver
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = self.browser_path
        for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--window-size=900,600"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(self.driver_path), options=options)
        self.drivers.append(driver)
        driver.get(url)
        return driver

    def close(self, driver) -> None:
        if driver in self.drivers:
            self.drivers.remove(driver)
        driver.quit()

    def quit(self) -> None:
        for driver in self.drivers:
            try:
                driver.quit()
            except Exception:  # noqa: BLE001 - the browser may be gone already
                pass
        self.drivers.clear()


class Tab:
    """One browser tab of a page (a window of the module's browser)."""

    def __init__(self, driver, handle: str, name: str) -> None:
        self.driver = driver
        self.handle = handle
        self.name = name

    def focus(self):
        self.driver.switch_to.window(self.handle)
        return self.driver

    def js(self, script: str, *args):
        return self.focus().execute_script(script, *args)

    def wait(self, script: str, what: str, timeout: float = 20.0, *args):
        """Wait until ``script`` (returning a value) returns something truthy."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            value = self.js(script, *args)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: timed out waiting for {what}; page log: "
                                     f"{self.js('return document.body.innerText')[-800:]!r}")
            time.sleep(0.05)

    def screenshot(self, name: str) -> None:
        """This tab as ``name`` (a PNG) in the directory ``$GROUPCOMM_SCREENSHOTS`` names,
        when it names one: the pictures of docs/web.md are taken so."""
        where = os.environ.get("GROUPCOMM_SCREENSHOTS")
        if where:
            Path(where).mkdir(parents=True, exist_ok=True)
            self.focus().save_screenshot(str(Path(where) / name))

    def keys(self, element_id: str, *keys: str) -> None:
        from selenium.webdriver.common.by import By

        element = self.focus().find_element(By.ID, element_id)
        # the editor's text is CodeMirror's: the keys go to its content, as a person's
        editable = element.find_elements(By.CSS_SELECTOR, ".cm-content")
        (editable[0] if editable else element).send_keys(*keys)


@pytest.fixture(scope="module")
def tabs(browser: BrowserFactory) -> Iterator[TabOpener]:
    opener = TabOpener(browser)
    yield opener


class TabOpener:
    """Opens tabs in one browser (each tab has its own session storage, so its own
    login)."""

    def __init__(self, factory: BrowserFactory) -> None:
        self.factory = factory
        self.driver = None
        #: windows whose page was left (blank), to be used again
        self.free: list[str] = []

    def open(self, url: str, name: str) -> Tab:
        if self.driver is None:
            self.driver = self.factory.open(url)
            return Tab(self.driver, self.driver.current_window_handle, name)
        if self.free:
            self.driver.switch_to.window(self.free.pop())
        else:
            self.driver.switch_to.new_window("tab")
        self.driver.get(url)
        # a window used again keeps its session storage: this link's login replaces it
        return Tab(self.driver, self.driver.current_window_handle, name)

    def leave(self, *tabs: Tab) -> None:
        """Leave the tabs' pages (their members leave the session); the windows stay
        for later tabs (closing the last one would end the browser session)."""
        for tab in tabs:
            tab.focus().get("about:blank")
            self.free.append(tab.handle)


class Outage:
    """A gateway that a test kills and starts again on the same port with the same
    users (the tabs' login links stay good)."""

    def __init__(self, group: ProcessGroup, workdir: Path, session: str,
                 users: tuple[str, ...], extra: tuple[str, ...] = ()) -> None:
        """``extra``: more options of the gateway, each time it starts."""
        self.group = group
        self.workdir = workdir
        self.session = session
        self.extra = extra
        self.gateway = GatewayProcess(group, workdir, session=session, users=users,
                                      extra=extra)

    def kill(self) -> None:
        self.gateway.kill()  # SIGKILL: no member leaves gracefully

    def restart(self) -> GatewayProcess:
        old = self.gateway
        deadline = time.monotonic() + 20
        while True:  # the port may take a moment to be free again
            try:
                self.gateway = GatewayProcess(self.group, self.workdir, session=self.session,
                                              http=old.host_port, tokens=old.tokens,
                                              extra=self.extra)
                return self.gateway
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        self.gateway.stop()


@pytest.fixture
def outage(request: pytest.FixtureRequest, session_group: ProcessGroup,
           tmp_path: Path) -> Iterator[Outage]:
    users = getattr(request, "param", ("ann", "ben"))
    session = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[-40:]
    down = Outage(session_group, tmp_path, f"outage{session}", users)
    try:
        yield down
    finally:
        down.stop()
