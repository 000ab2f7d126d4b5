"""Running tshark with the rdmadiag plugin loaded from a build tree.

Wireshark 4.0 ignores WIRESHARK_PLUGIN_DIR and the personal plugin folder when
it runs with special privileges, and it counts root as such: as root, tshark
is run as the unprivileged user 65534 (setpriv), which can read the build
tree and the captures. A plugin built with AddressSanitizer gets libasan
preloaded (tshark itself is not instrumented)."""
import os
import pathlib
import subprocess
import tempfile

PLUGIN_NAME = "rdmadiag.so"


class Tshark:
    def __init__(self, plugin_root, tshark="tshark"):
        self.plugin_root = pathlib.Path(plugin_root).resolve()
        self.tshark = tshark
        self.home = tempfile.mkdtemp(prefix="rdmadiag-ws-home-")
        os.chmod(self.home, 0o777)
        self.env = dict(os.environ, HOME=self.home, WIRESHARK_PLUGIN_DIR=str(self.plugin_root))
        self.env.pop("DISPLAY", None)
        self.prefix = []
        if os.geteuid() == 0:
            self.prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        plugins = list(self.plugin_root.glob(f"*/epan/{PLUGIN_NAME}"))
        self.plugin = plugins[0] if plugins else None
        self.asan = False
        if self.plugin:
            ldd = subprocess.run(["ldd", str(self.plugin)], capture_output=True, text=True).stdout
            for line in ldd.splitlines():
                if "libasan" in line and "=>" in line:
                    self.env["LD_PRELOAD"] = line.split("=>")[1].split()[0]
                    self.env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=1:allocator_may_return_null=1"
                    self.asan = True
                    # The preload reaches the extcap helpers tshark starts, and some hang under it: start none.
                    no_extcap = tempfile.mkdtemp(prefix="rdmadiag-ws-noextcap-")
                    os.chmod(no_extcap, 0o755)
                    self.env["WIRESHARK_EXTCAP_DIR"] = no_extcap

    def run(self, args, timeout=600):
        return subprocess.run(self.prefix + [self.tshark] + list(args), capture_output=True, text=True,
                              env=self.env, timeout=timeout)

    def plugin_loaded(self):
        r = self.run(["-G", "plugins"])
        return any(line.startswith(PLUGIN_NAME) for line in r.stdout.splitlines())

    def readable(self, path):
        """Whether tshark (possibly as user 65534) can read `path`."""
        if not self.prefix:
            return os.access(path, os.R_OK)
        r = subprocess.run(self.prefix + ["test", "-r", str(path)])
        return r.returncode == 0


def tshark_or_skip(plugin_root):
    """A Tshark that loads the plugin, or None (after saying why: the caller exits 77, CTest's skip)."""
    ts = Tshark(plugin_root)
    if not ts.plugin:
        print(f"SKIP: no plugin under {plugin_root}")
        return None
    try:
        if not ts.plugin_loaded():
            why = "" if ts.readable(ts.plugin) else f" ({ts.plugin} is not readable by uid 65534, which tshark runs as under root)"
            print(f"SKIP: tshark does not load the plugin (tshark -G plugins){why}")
            return None
    except FileNotFoundError:
        print("SKIP: tshark or setpriv not installed")
        return None
    return ts
