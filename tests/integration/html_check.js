// Loads a memleak-ai HTML report in headless Chromium, offline: reports page errors, what rendered, and a screenshot.
// html_check.js REPORT.html SHOT.png: one page, one JSON line. html_check.js --serve: one browser for many pages,
// each in a context of its own: a JSON array [REPORT.html, SHOT.png] a line on stdin, a JSON line back for each.
const { chromium } = require(process.env.PLAYWRIGHT_CORE);
const readline = require("readline");

function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

async function check(browser, file, shot) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 2000 } });
  try {
    const page = await context.newPage();
    const errors = [], requests = [];
    page.on("pageerror", e => errors.push(String(e)));
    page.on("console", m => { if (m.type() === "error") errors.push(m.text()); });
    page.on("request", r => { if (!r.url().startsWith("file:")) requests.push(r.url()); });
    await page.goto("file://" + file);
    await page.waitForSelector("body[data-rendered=yes]", { timeout: 15000 }).catch(() => {});
    // The flame graph writes its labels at the end of a transition: wait for them rather than a fixed time.
    await page.waitForFunction(() => Array.from(document.querySelectorAll("#flame svg .d3-flame-graph-label"))
      .some(e => e.textContent.length > 0), null, { timeout: 15000 }).catch(() => {});
    const result = await page.evaluate(() => ({
      rendered: document.body.dataset.rendered === "yes",
      plots: document.querySelectorAll(".uplot canvas").length,
      legend: Array.from(document.querySelectorAll("#stacks .u-legend .u-label")).map(e => e.textContent),
      flameRects: document.querySelectorAll("#flame svg rect").length,
      flameText: Array.from(document.querySelectorAll("#flame svg .d3-flame-graph-label")).map(e => e.textContent),
      rows: Array.from(document.querySelectorAll("#table tbody tr")).map(tr =>
        Array.from(tr.children).map(td => td.textContent)),
    }));
    await page.screenshot({ path: shot, fullPage: true });
    return { errors, requests, ...result };
  } finally {
    await context.close();
  }
}

(async () => {
  const args = process.argv.slice(2);
  const browser = await launch();
  if (args[0] !== "--serve") {
    const result = await check(browser, args[0], args[1]);
    await browser.close();
    console.log(JSON.stringify(result));
    return;
  }
  for await (const line of readline.createInterface({ input: process.stdin })) {
    if (!line.trim())
      continue;
    const [file, shot] = JSON.parse(line);
    const result = await check(browser, file, shot).catch(e => ({ fatal: String(e) }));
    console.log(JSON.stringify(result));
  }
  await browser.close();
})().catch(e => { console.log(JSON.stringify({ fatal: String(e) })); process.exit(1); });
