"""Finding (and on a fresh Debian machine, installing) the Chromium the browser tests drive."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
ENV = "DSE_CHROMIUM"


def find_chromium() -> str | None:
    if os.environ.get(ENV):
        return os.environ[ENV]
    return next((path for path in map(shutil.which, CANDIDATES) if path), None)


def install_debian_chromium() -> str:
    """Install Debian's ``chromium`` package (needs root and apt); returns what went wrong or
    an empty string."""
    if not shutil.which("apt-get"):
        return "apt-get is not available"
    if os.geteuid() != 0:
        return "installing Debian's chromium package needs root"
    print("installing Debian's chromium package for the browser tests ...", file=sys.stderr,
          flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-q"],
                    ["apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"]):
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            return f"{' '.join(command)} failed: {done.stderr.strip()[-500:]}"
    return ""
