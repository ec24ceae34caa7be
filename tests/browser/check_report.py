#!/usr/bin/env python3
"""The HTML report in a real browser (ctest label `browser`).

Writes the report of a summary (traces/samples/sample_summary.json) with attnprof_report_page and
opens it in headless Chromium from Debian. Asserts:
  - the DOM (--dump-dom) holds a row per case, and every chart its marks (class "mark"), as many
    as the summary says: a bar row per case that ran and a mark per kernel category with time, a
    bar group per problem and a bar per case, a roofline point per case under two roofs (or the
    "roofs unknown" note), and on a second page with achieved occupancy two marks per kernel;
  - the screenshot (PNG) shows each chart's colours, so the marks were painted, not only present;
  - no request left the page: Chromium's net log (--log-net-log) names no URL but the page's own
    file:// and data:, for the page as written and for a copy without its Content-Security-Policy
    (so the page asks for nothing, not only that the policy refused it), while a control page with
    one external image shows that the net log does record requests.
Without Chromium it exits 77, which ctest reports as skipped.
"""
import argparse
import html.parser
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

SKIP = 77
H200_ROOFS = ["989", "4800", "NVIDIA H200 SXM datasheet: 989 TFLOP/s dense BF16 on tensor cores, 4.8 TB/s HBM3e"]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-features=NetworkTimeServiceQuerying", "--force-device-scale-factor=1", "--hide-scrollbars",
                  "--enable-logging=stderr", "--v=0"]
CONTROL_URL = "http://127.0.0.1:9/attnprof-control.png"  # the discard port: refused at once, but requested
WINDOW = (1280, 6000)  # taller than the sample's page, which the screenshot check asserts

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
    return condition


def find_chromium():
    """ATTNPROF_CHROMIUM when set (only it: set it to a missing path to see the skip), else Debian's."""
    if "ATTNPROF_CHROMIUM" in os.environ:
        candidates = [os.environ["ATTNPROF_CHROMIUM"]]
    else:
        candidates = ["/usr/bin/chromium", shutil.which("chromium")]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def run_chromium(chromium, work, name, url, extra):
    """Runs Chromium on url with a fresh profile and its own net log; returns (stdout, stderr, net log path)."""
    profile = tempfile.mkdtemp(prefix=f"profile-{name}-", dir=work)
    net_log = os.path.join(work, f"{name}.netlog.json")
    command = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--log-net-log={net_log}", *extra, url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        failures.append(f"chromium exited {done.returncode} on {name}:\n{done.stderr[-3000:]}")
    shutil.rmtree(profile, ignore_errors=True)
    return done.stdout, done.stderr, net_log


def read_net_log(net_log):
    """The events of a net log, with their types by name; a log Chromium did not close is closed here."""
    with open(net_log, encoding="utf-8", errors="replace") as f:
        text = f.read()
    try:
        log = json.loads(text)
    except json.JSONDecodeError:
        log = json.loads(text.rstrip().rstrip(",") + "]}")
    names = {number: name for name, number in log["constants"]["logEventTypes"].items()}
    return [(names.get(e["type"], ""), e.get("params", {})) for e in log.get("events", [])]


def host_of(url):
    match = re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://\[?([^/\]?#:\s]*)", url)
    return match.group(1).lower() if match else url.lower()


# Fields that name where the network stack went (a URL, a host, a socket group "https://host <key>").
DESTINATIONS = {"url", "original_url", "new_location", "destination", "logical_destination", "host", "hostname",
                "qname", "server_name", "group_id"}


def network_activity(net_log):
    """(requests made for the page, requests Chromium made for itself, hosts the log names outside both).

    A URL request made for a web page carries the page's origin as its initiator ("null" for a
    file:// page); Chromium's own (update checks, account lookups) carry "not an origin". Every host
    the log sends DNS queries, sockets or streams to must belong to one of those requests, so a DNS
    prefetch or preconnect without a URL request is caught too."""
    events = read_net_log(net_log)
    page, own = set(), set()
    for kind, params in events:
        if kind == "URL_REQUEST_START_JOB" and params.get("url"):
            (own if params.get("initiator", "not an origin") == "not an origin" else page).add(params["url"])
    accounted = {host_of(u) for u in page | own}
    named = set()
    for _, params in events:
        for key in DESTINATIONS & params.keys():
            if isinstance(params[key], str) and params[key]:
                value = params[key].split(" ")[0].removeprefix("pm/")
                if not value.startswith(("file:", "data:", "chrome:", "about:", "blob:")):
                    named.add(host_of(value))
    return page, own, sorted(h for h in named - accounted if h)


def check_no_request_left(name, net_log, page_url):
    """No URL but the page's own file:// and data: requested for the page; nothing unexplained."""
    page, own, unexplained = network_activity(net_log)
    foreign = sorted(u for u in page if not u.startswith("data:") and u.split("#")[0] != page_url)
    check(not foreign, f"{name}: requests left the page: {foreign}")
    check(not unexplained, f"{name}: the net log names hosts no request explains: {unexplained}")
    if own:
        print(f"{name}: Chromium's own requests, not the page's: {sorted({host_of(u) for u in own})}")
    return foreign


class Dom(html.parser.HTMLParser):
    """Counts, per chart, the elements of each class; and the page's rows, groups and references."""

    VOID = {"meta", "br", "img", "input", "link", "hr", "col", "area", "base", "source", "wbr"}

    def __init__(self):
        super().__init__()
        self.stack = []  # (tag, chart name or None)
        self.charts = {}
        self.counts = {}
        self.references = []
        self.tags = set()
        self.csp = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.add(tag)
        classes = (a.get("class") or "").split()
        if tag == "meta" and (a.get("http-equiv") or "").lower() == "content-security-policy":
            self.csp = a.get("content")
        for key in ("src", "href", "xlink:href", "srcset", "action", "poster", "data"):
            if key in a:
                self.references.append(f"<{tag} {key}={a[key]}>")
        chart = self.stack[-1][1] if self.stack else None
        if tag == "svg" and "chart" in classes:
            chart = a.get("data-chart")
            self.charts.setdefault(chart, {})
        for c in classes:
            self.counts[c] = self.counts.get(c, 0) + 1
            if chart is not None:
                self.charts[chart][c] = self.charts[chart].get(c, 0) + 1
        if tag not in self.VOID:
            self.stack.append((tag, chart))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()[0] == tag:
                break


def flops(problem):
    n = problem["batch"] * problem["heads"] * problem["seq_q"] * problem["seq_kv"] * problem["head_dim"]
    return 4.0 * n / (2 if problem.get("causal") else 1)


def expected_counts(summary, achieved_everywhere):
    """What each chart must show, from the summary alone."""
    cases = summary["cases"]
    ran = [c for c in cases if c["status"] == "ok"]
    categories = 0
    for c in ran:
        kernel_us = {}
        for k in c["kernels"]:
            kernel_us[k["category"]] = kernel_us.get(k["category"], 0) + k["gpu_us_per_iter"]
        categories += sum(1 for us in kernel_us.values() if us > 0)
        per_iter = c["per_iter"]
        memory_us = per_iter["gpu_busy_us"] - sum(kernel_us.values())
        categories += 1 if (per_iter["memcpy"] > 0 or per_iter["memset"] > 0) and memory_us > 1e-6 else 0
    with_flops = [c for c in ran if flops(c["problem"]) > 0 and c["timing"]["tflops"] > 0]
    problems = {json.dumps(c["problem"], sort_keys=True) for c in with_flops}
    backends = {c["backend"] for c in with_flops}
    occupancy_kernels = sum(len(c["kernels"]) for c in ran) if achieved_everywhere else sum(
        1 for c in ran for k in c["kernels"] if k.get("achieved_occupancy_percent") is not None)
    finding_groups = {f["kind"] for c in cases for f in c["findings"]}  # each kind once
    return {
        "cases": len(cases), "finding_groups": len(finding_groups),
        "gpu-time": {"bar-row": len(ran), "mark": categories},
        "tflops": {"bar-group": len(problems), "mark": len(with_flops), "legend-item": len(backends)},
        "roofline": {"mark": len(with_flops)},
        "occupancy": {"bar-row": occupancy_kernels, "mark": 2 * occupancy_kernels},
    }


def check_dom(name, dom_text, summary, achieved_everywhere, roofs_known):
    dom = Dom()
    dom.feed(dom_text)
    want = expected_counts(summary, achieved_everywhere)
    check(dom.csp is not None and "default-src 'none'" in dom.csp, f"{name}: no Content-Security-Policy forbidding loads")
    check(not dom.references, f"{name}: external references in the DOM: {dom.references}")
    for tag in ("script", "img", "link", "iframe", "object", "embed"):
        check(tag not in dom.tags, f"{name}: a <{tag}> in the DOM")
    check(dom.counts.get("case", 0) == want["cases"], f"{name}: {dom.counts.get('case', 0)} case rows, want {want['cases']}")
    check(dom.counts.get("finding-group", 0) == want["finding_groups"],
          f"{name}: {dom.counts.get('finding-group', 0)} finding groups, want {want['finding_groups']}")
    charts = ["gpu-time", "tflops", "roofline"] + (["occupancy"] if want["occupancy"]["mark"] else [])
    check(sorted(dom.charts) == sorted(charts), f"{name}: charts {sorted(dom.charts)}, want {sorted(charts)}")
    for chart in charts:
        got = dom.charts.get(chart, {})
        check(got.get("mark", 0) > 0, f"{name}: chart {chart} drew no marks")
        for cls, count in want[chart].items():
            check(got.get(cls, 0) == count, f"{name}: chart {chart} has {got.get(cls, 0)} .{cls}, want {count}")
    roofline = dom.charts.get("roofline", {})
    if roofs_known:
        check(roofline.get("roof", 0) == 2 and "roofs-unknown" not in roofline, f"{name}: want two roofs, got {roofline}")
    else:
        check(roofline.get("roofs-unknown", 0) == 1 and "roof" not in roofline, f"{name}: want the roofs-unknown note")
    return {chart: dom.charts.get(chart, {}).get("mark", 0) for chart in charts}


def read_png(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    at, idat, header = 8, b"", None
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    width, height, depth, color, _, _, interlace = header
    if depth != 8 or color not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {color}, interlace {interlace}")
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            up_left = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else up_left)) & 0xFF
        rows.append(bytes(line) if channels == 3 else bytes(b for i, b in enumerate(line) if i % 4 != 3))
        previous = line if channels == 3 else line
    return width, height, rows


def write_png(path, width, rows):
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + row for row in rows)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, len(rows), 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def check_screenshot(png, cropped, colors):
    """The charts' colours are painted; writes the screenshot cropped to the page's content."""
    width, height, rows = read_png(png)
    check((width, height) == WINDOW, f"screenshot is {width}x{height}, want {WINDOW}")
    background = rows[-1][:3]
    last = max((y for y, row in enumerate(rows) if row != background * width), default=0)
    check(last < height - 1, "the page is taller than the screenshot window: raise WINDOW")
    wanted = {bytes.fromhex(c[1:]): c for c in colors}
    seen = dict.fromkeys(wanted, 0)
    for row in rows[:last + 1]:
        for x in range(0, len(row), 3):
            pixel = row[x:x + 3]
            if pixel in seen:
                seen[pixel] += 1
    for pixel, count in seen.items():
        check(count >= 20, f"colour {wanted[pixel]} painted on {count} pixels of the screenshot")
    write_png(cropped, width, rows[:min(height, last + 24)])
    return {wanted[p]: n for p, n in seen.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--page-writer", required=True)
    parser.add_argument("--summary", required=True)
    parser.add_argument("--out", required=True, help="folder for the pages, DOMs, net logs and the screenshot")
    args = parser.parse_args()

    chromium = find_chromium()
    if chromium is None:
        print("SKIPPED: no Chromium (apt-get install chromium, or set ATTNPROF_CHROMIUM)")
        return SKIP
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    work = os.path.abspath(args.out)
    with open(args.summary, encoding="utf-8") as f:
        summary = json.load(f)

    # The second page is drawn from a copy without the recorded roofs, so that it shows the
    # roofs-unknown note.
    without_roofs = os.path.join(work, "summary_without_roofs.json")
    with open(without_roofs, "w", encoding="utf-8") as f:
        json.dump({k: v for k, v in summary.items() if k != "roofs"}, f)
    pages = {
        "report": (["--roofs", *H200_ROOFS], False, True, args.summary),
        "occupancy": (["--synthetic-achieved-occupancy"], True, False, without_roofs),
    }
    for name, (options, _, _, source) in pages.items():
        subprocess.run([args.page_writer, source, os.path.join(work, f"{name}.html"), *options], check=True)
    with open(os.path.join(work, "report.html"), encoding="utf-8") as f:
        report = f.read()
    without_csp = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>\n?', "", report)
    check(without_csp != report, "report.html has no Content-Security-Policy meta to remove")
    with open(os.path.join(work, "report_without_csp.html"), "w", encoding="utf-8") as f:
        f.write(without_csp)
    with open(os.path.join(work, "control.html"), "w", encoding="utf-8") as f:
        f.write(f'<!DOCTYPE html><html><body><img src="{CONTROL_URL}" alt=""></body></html>\n')

    def url(name):
        return "file://" + os.path.join(work, f"{name}.html")

    # DOM of each page, each run with its own net log.
    for name, (_, achieved_everywhere, roofs_known, _) in pages.items():
        dom, stderr, net_log = run_chromium(chromium, work, f"{name}-dom", url(name), ["--dump-dom"])
        with open(os.path.join(work, f"{name}.dom.html"), "w", encoding="utf-8") as f:
            f.write(dom)
        marks = check_dom(name, dom, summary, achieved_everywhere, roofs_known)
        print(f"{name}: marks per chart {marks}")
        check_no_request_left(name, net_log, url(name))
        check("Refused to" not in stderr, f"{name}: the page tried a load its policy refused:\n{stderr[-2000:]}")

    # The screenshot of the report page: its charts' colours (compute and backends) painted.
    _, _, net_log = run_chromium(chromium, work, "report-screenshot", url("report"),
                                 [f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={work}/report.full.png"])
    check_no_request_left("report (screenshot)", net_log, url("report"))
    if check(os.path.exists(f"{work}/report.full.png"), "no screenshot written"):
        painted = check_screenshot(f"{work}/report.full.png", f"{work}/report.png",
                                   ["#4e79a7", "#f28e2b", "#59a14f", "#e15759"])
        print(f"screenshot: pixels per chart colour {painted}; cropped copy {work}/report.png")

    # The page without its policy asks for nothing either; the control shows the net log sees requests.
    _, _, net_log = run_chromium(chromium, work, "report-without-csp", url("report_without_csp"), ["--dump-dom"])
    check_no_request_left("report without its policy", net_log, url("report_without_csp"))
    _, _, net_log = run_chromium(chromium, work, "control", url("control"), ["--dump-dom"])
    page_requests, _, _ = network_activity(net_log)
    check(CONTROL_URL in page_requests,
          f"the control page's request to {CONTROL_URL} is not among its page requests in the net log, so the check "
          f"would prove nothing (found {sorted(page_requests)})")

    for message in failures:
        print("FAILED:", message)
    print("browser test:", "FAILED" if failures else "passed", f"(output in {work})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
