#!/usr/bin/python3
"""Loads a memleak-ai HTML report in headless Chromium, offline, through Selenium and chromedriver (Debian's
python3-selenium, chromium and chromium-driver): reports page errors, network requests, what rendered (title,
the Chart.js timelines, the flame graph's frames against the page's data, the table), how the flame graph answers
a click (zoom) and a search, and a full-page screenshot.

html_check.py REPORT.html SHOT.png [REGEX]: one page, one JSON line. html_check.py --serve: one browser for many
pages, each in a tab of its own: a JSON array [REPORT.html, SHOT.png] or [REPORT.html, SHOT.png, REGEX] a line on
stdin, a JSON line back for each. REGEX is what to type into the flame graph's search box; by default the exact
name of the frame the zoom check clicks.

Run it with Debian's /usr/bin/python3: python3-selenium lives in its dist-packages."""
import base64
import json
import os
import sys

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

WIDTH, HEIGHT = 1280, 2000


def launch():
    o = Options()
    o.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-dev-shm-usage", f"--window-size={WIDTH},{HEIGHT}", "--hide-scrollbars"):
        o.add_argument(a)
    # browser: console errors and uncaught exceptions (SEVERE); performance: the DevTools network events.
    o.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    svc = Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"), log_path=os.devnull)
    d = webdriver.Chrome(service=svc, options=o)
    d.set_page_load_timeout(30)
    return d


# What rendered, measured in the page. The flame graph's expected frames come from the data (window.MEMLEAK),
# counted here, not by the page's own code: every frame with bytes, under a parent with bytes.
STATIC = r"""
const M = window.MEMLEAK || {};
function painted(c) {
  const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 3; i < d.length; i += 4) if (d[i]) n++;
  return n;
}
const charts = ["layers", "stacks"].map(id => {
  const c = document.querySelector("#" + id + " canvas");
  const ch = c && window.Chart ? Chart.getChart(c) : null;
  if (!ch) return { id, chart: false };
  return { id, chart: true, datasets: ch.data.datasets.length,
           points: ch.data.datasets.reduce((s, d) => s + d.data.filter(p => p && p.y != null).length, 0),
           painted: painted(c), width: c.clientWidth, height: c.clientHeight,
           legend: ((ch.legend && ch.legend.legendItems) || []).map(i => i.text) };
});
// The data's frames 1 px wide or more at the page's width: the ones flame.js draws before any zoom.
const flameSvg = document.querySelector("#flame svg"), flameW = flameSvg ? +flameSvg.getAttribute("width") : 0;
let frames = 0;
(function walk(n) {
  if (!(n && Number(n.value) > 0) || Number(n.value) / Number(M.flame.value) * flameW < 1) return;
  frames++;
  (n.children || []).forEach(walk);
})(M.flame);
// Every node of the data: a name twice among a node's children, or children holding more than their node, is a
// tree built wrong (user/report/html.c's child() finds a node's children by name).
let flameNodes = 0;
const flameBad = [];
(function all(n) {
  flameNodes++;
  const kids = n.children || [], names = new Set(kids.map(k => k.name));
  if (names.size !== kids.length || kids.reduce((s, k) => s + Number(k.value), 0) > Number(n.value))
    flameBad.push(n.name);
  kids.forEach(all);
})(M.flame || {});
const shown = Array.from(document.querySelectorAll("#flame svg g.frame")).filter(g => g.style.display !== "none");
return {
  rendered: document.body.dataset.rendered === "yes",
  docTitle: document.title,
  title: (document.getElementById("title") || {}).textContent || "",
  charts,
  plots: charts.filter(c => c.chart && c.datasets > 0 && c.points > 0 && c.painted > 1000).length,
  legend: charts[1].legend || [],
  flameData: frames,
  flameNodes,
  flameBad: flameBad.slice(0, 3),
  flameRects: document.querySelectorAll("#flame svg rect").length,
  flameShown: shown.length,
  flameText: shown.map(g => g.querySelector("text").textContent).filter(t => t.length > 0),
  flameTitles: Array.from(document.querySelectorAll("#flame svg g.frame > title")).map(t => t.textContent),
  rows: Array.from(document.querySelectorAll("#table tbody tr")).map(tr =>
    Array.from(tr.children).map(td => td.textContent)),
};
"""

# The flame graph now: its full width (the root frame's), each shown frame's geometry.
FLAME = r"""
const gs = Array.from(document.querySelectorAll("#flame svg g.frame"));
const info = gs.map((g, i) => {
  const r = g.querySelector("rect");
  return { i, depth: +g.dataset.depth, shown: g.style.display !== "none", parent: g.classList.contains("parent"),
           match: g.classList.contains("match"), x: +r.getAttribute("x"), w: +r.getAttribute("width"),
           name: g.querySelector("title").textContent.replace(/: [^:]*$/, ""),
           fill: g.classList.contains("match") ? getComputedStyle(r).fill : null };
});
const root = info.find(f => f.depth === 0);
const reset = document.getElementById("flame-reset"), matched = document.getElementById("flame-matched");
return { full: root ? root.w : 0, frames: info, resetEnabled: reset ? !reset.disabled : null,
         matched: matched ? matched.textContent : null };
"""

# What a search for a regex must find, from the data: the frames whose name matches, and their bytes' share of
# the root's (a match under a matching frame counted once).
EXPECT = r"""
const re = new RegExp(arguments[0]), M = window.MEMLEAK;
const flameSvg = document.querySelector("#flame svg"), flameW = flameSvg ? +flameSvg.getAttribute("width") : 0;
let count = 0, drawn = 0, bytes = 0;
(function walk(n, under) {
  if (!(Number(n.value) > 0)) return;
  const hit = re.test(String(n.name));
  if (hit) count++;
  if (hit && Number(n.value) / Number(M.flame.value) * flameW >= 1) drawn++;
  if (hit && !under) bytes += Number(n.value);
  (n.children || []).forEach(k => walk(k, under || hit));
})(M.flame, false);
return { count, drawn, share: (100 * bytes / Number(M.flame.value)).toFixed(1) + "%" };
"""


def frame_el(d, i):
    # One element, not a WebDriver reference to each of thousands of frames (0.4 s a call at 8,000 frames).
    return d.execute_script("return document.querySelectorAll('#flame svg g.frame')[arguments[0]]", i)


def shown(state):
    return [f for f in state["frames"] if f["shown"]]


def zoom_check(d):
    """Click the widest frame above the root that does not fill the width: it must fill it, the frames above it
    scale with it, its ancestors stay at full width, the frames outside it go; a click on the root and one on
    "reset zoom" must each undo it."""
    before = d.execute_script(FLAME)
    full = before["full"]
    cands = [f for f in shown(before) if f["depth"] >= 1 and f["w"] < full - 1]
    if not cands:
        return {"frame": None, "note": "no frame narrower than the root: nothing to zoom into"}
    t = max(cands, key=lambda f: (f["w"], -f["i"]))
    out = {"frame": t["name"], "depth": t["depth"], "full": full, "widthBefore": t["w"],
           "shownBefore": len(shown(before))}
    frame_el(d, t["i"]).click()
    z = d.execute_script(FLAME)
    zf = z["frames"][t["i"]]
    out.update(widthAfter=zf["w"], xAfter=zf["x"], shownAfter=len(shown(z)), resetEnabled=z["resetEnabled"],
               parents=sum(f["parent"] for f in z["frames"]),
               parentsFull=all(f["shown"] and f["x"] == 0 and abs(f["w"] - full) < 0.5
                               for f in z["frames"] if f["parent"]),
               withinWidth=all(f["x"] >= -0.01 and f["x"] + f["w"] <= full + 0.5 for f in shown(z)))
    # Above it, every frame shown before and after is scaled by full / its width, from its left edge.
    k = full / t["w"]
    above = [(b, a) for b, a in zip(before["frames"], z["frames"])
             if b["shown"] and a["shown"] and b["depth"] > t["depth"]]
    out["scaledFrames"] = len(above)
    out["scaled"] = all(abs(a["w"] - b["w"] * k) < 0.5 and abs(a["x"] - (b["x"] - t["x"]) * k) < 0.5
                        for b, a in above)
    root = next(f["i"] for f in z["frames"] if f["depth"] == 0)
    frame_el(d, root).click()
    r = d.execute_script(FLAME)
    out["rootClickRestores"] = (r["frames"][t["i"]]["w"] == t["w"] and len(shown(r)) == out["shownBefore"]
                                and not r["resetEnabled"])
    frame_el(d, t["i"]).click()
    d.find_element(By.ID, "flame-reset").click()
    r = d.execute_script(FLAME)
    out["resetRestores"] = (r["frames"][t["i"]]["w"] == t["w"] and len(shown(r)) == out["shownBefore"]
                            and not r["resetEnabled"])
    return out


def search_check(d, term):
    """Type term into the search box: the matching frames are highlighted, their share shown; clearing the box
    clears both."""
    want = d.execute_script(EXPECT, term)
    box = d.find_element(By.ID, "flame-search")
    box.send_keys(term)
    s = d.execute_script(FLAME)
    hit = [f for f in s["frames"] if f["match"]]
    # Highlighted: the matches drawn (1 px or wider, unzoomed); the share and count shown: every match.
    out = {"term": term, "expected": want["drawn"], "matches": want["count"], "highlighted": len(hit),
           "matchedText": s["matched"],
           "expectedText": f"matched: {want['share']}",
           "highlightFill": sorted({f["fill"] for f in hit})}
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.BACKSPACE)
    c = d.execute_script(FLAME)
    out["cleared"] = not any(f["match"] for f in c["frames"]) and c["matched"] == ""
    return out


def requests_from(log):
    urls = []
    for e in log:
        try:
            m = json.loads(e["message"])["message"]
        except (KeyError, ValueError):
            continue
        if m.get("method") in ("Network.requestWillBeSent", "Network.webSocketCreated"):
            url = m.get("params", {}).get("request", {}).get("url") or m.get("params", {}).get("url", "")
            if not url.startswith("file:"):
                urls.append(url)
    return urls


def check(d, file, shot, term=None):
    # A tab of its own for each page; the last one closed.
    old = d.window_handles
    d.switch_to.new_window("tab")
    for h in old:
        d.switch_to.window(h)
        d.close()
    d.switch_to.window(d.window_handles[0])
    d.get_log("browser")
    d.get_log("performance")
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                      {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
    d.get("file://" + os.path.abspath(file))
    try:
        WebDriverWait(d, 15).until(lambda d: d.execute_script("return document.body.dataset.rendered === 'yes'"))
    except TimeoutException:
        pass
    res = d.execute_script(STATIC)
    # The whole page, up to 8,000 px tall: Chromium cannot capture a taller one ("Unable to capture
    # screenshot", seen with an import-time flame graph and table), and the picture is for a person to look at.
    w, h = d.execute_script("return [document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
    png = d.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": w, "height": min(h, 8000), "scale": 1}})["data"]
    with open(shot, "wb") as f:
        f.write(base64.b64decode(png))
    if res["rendered"] and res["flameRects"]:
        res["zoom"] = zoom_check(d)
        if term is None:
            name = res["zoom"]["frame"] or d.execute_script(FLAME)["frames"][0]["name"]
            term = "^" + d.execute_script(r"return arguments[0].replace(/[.*+?^${}()|[\]\\]/g, '\\$&')", name) + "$"
        res["search"] = search_check(d, term)
    res["errors"] = [e["message"] for e in d.get_log("browser") if e.get("level") == "SEVERE"]
    res["requests"] = requests_from(d.get_log("performance"))
    return res


def main():
    args = sys.argv[1:]
    d = launch()
    try:
        if args[0] != "--serve":
            print(json.dumps(check(d, *args[:3])), flush=True)
            return
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                res = check(d, *json.loads(line))
            except Exception as e:  # noqa: BLE001 - one page's failure is its answer; the next gets a new browser
                res = {"fatal": f"{type(e).__name__}: {e}"}
                try:
                    d.quit()
                except Exception:  # noqa: BLE001
                    pass
                d = launch()
            print(json.dumps(res), flush=True)
    finally:
        d.quit()


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - the harness reads a JSON line, whatever happened
        print(json.dumps({"fatal": f"{type(e).__name__}: {e}"}), flush=True)
        sys.exit(1)
