"""Every string from an input is text on the page, never markup: a log carrying <script>, attribute
breakouts with event handlers, javascript: URLs and control characters, under a hostile file name."""

from __future__ import annotations

import re

from test_report_cmd import Dom, external_urls
from ncdoc.cli.main import main

PAYLOADS = ["<script>alert(1)</script>", '"><img src=x onerror=alert(2)>', "javascript:alert(3)",
            "'><svg onload=alert(4)>", "</textarea><iframe src=//evil.example>"]
CONTROLS = "\x1b[31mred\x1b[0m \x07bell \x08back \x9bcsi"     # (a NUL makes the log a binary file)

LOG = """\
trainer-0:2231:2231 [0] NCCL INFO Bootstrap : Using eth0:10.42.3.17<0>
NCCL version 2.18.5+cuda12.2
trainer-0:2231:2290 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to {p1}
trainer-0:2231:2290 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_open_device failed {p0} {ctl}
trainer-0:2231:2290 [0] transport/net_ib.cc:179 NCCL WARN NET/IB : Unable to open device mlx5_0 {p3} {p4}
trainer-0:2231:2290 [0] NCCL INFO NET/IB : No device found.
trainer-0:2231:2290 [0] NCCL INFO NET/Socket : Using [0]eth0:10.42.3.17<0>
trainer-0:2231:2290 [0] NCCL INFO Using network Socket
trainer-0:2231:2290 [0] NCCL INFO comm 0x5581d5f0 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0
trainer-0:2231:2290 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0
""".format(p0=PAYLOADS[0], p1=PAYLOADS[1], p3=PAYLOADS[3], p4=PAYLOADS[4], ctl=CONTROLS)


def hostile_report(tmp_path, capsys):
    log = tmp_path / '"><img src=x onerror=alert(5)>.log'
    log.write_text(LOG)
    out = tmp_path / "r.html"
    rc = main(["report", str(log), "--env", f"NCCL_SOCKET_IFNAME={PAYLOADS[2]}", "--env",
               f"NCCL_IB_HCA={PAYLOADS[1]}", "-o", str(out), "--title", PAYLOADS[0]])
    capsys.readouterr()
    assert rc == 0
    return out.read_text()


def test_no_payload_becomes_markup(tmp_path, capsys):
    text = hostile_report(tmp_path, capsys)
    dom = Dom(text)
    assert [t for t, _ in dom.tags if t in ("script", "img", "iframe", "textarea", "object", "embed")] == []
    assert [t for t, _ in dom.tags if t == "svg" and _.get("onload")] == []
    handlers = [(t, k) for t, a in dom.tags for k in a if k.lower().startswith("on")]
    assert handlers == []
    assert external_urls(dom) == []
    hrefs = [a.get("href") for t, a in dom.tags if a.get("href")]
    assert all(h.startswith("#") for h in hrefs), hrefs


def test_payloads_are_shown_as_the_text_they_are(tmp_path, capsys):
    text = hostile_report(tmp_path, capsys)
    shown = "".join(Dom(text).text)
    for p in PAYLOADS:
        assert p in shown, p                             # visible to the reader, as text
    assert "onerror=alert(5)>.log" in shown             # the file name too


def test_control_characters_are_made_visible_not_passed_through(tmp_path, capsys):
    text = hostile_report(tmp_path, capsys)
    assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x80-\x9f]", text)
    assert "\\x1b[31mred" in text and "\\x07bell" in text and "\\x08back" in text and "\\x9bcsi" in text
