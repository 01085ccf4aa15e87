// What the views of the network cost a run in the page: the same run with them closed and with
// them open (a digit's layers, its saliency by SmoothGrad's 50 copies or the gradient (1), refreshed at every log line, and the
// learning charts), in interleaved pairs, in Debian's headless Chromium.
//   node bench/inside.mjs WEBTRAIN_URL [backend] [pairs] [query] [copies]
// WEBTRAIN_URL serves a build of the page. Prints one JSON object: each run's samples/s (the
// page's own figure: training time, evaluation and pauses out) and the median slowdown.
import { chromium } from 'playwright-core';
import { chromiumFlags } from './tfjs.mjs';

const [base = 'http://127.0.0.1:8090', backend = 'cpu', pairs = '3',
  query = 'epochs=1&train_limit=6400&test_limit=200&log_interval=10&model=lenet', copies = '50'] = process.argv.slice(2);

async function run(browser, open) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 }, serviceWorkers: 'block' });
  await page.goto(`${base.replace(/\/$/, '')}/?${query}&backend=${backend}`);
  await page.waitForSelector('body[data-state="ready"]', { timeout: 180_000 });
  if (open) {
    // A drawn digit in view from the start: each log line asks for its layers again.
    await page.selectOption('#saliency-smoothing', copies);
    await page.locator('#draw').scrollIntoViewIfNeeded();
    const pad = await page.locator('#draw').boundingBox();
    await page.mouse.move(pad.x + 140, pad.y + 40);
    await page.mouse.down();
    await page.mouse.move(pad.x + 140, pad.y + 240, { steps: 10 });
    await page.mouse.up();
    await page.click('#look-inside-drawing');
  }
  await page.click('#start');
  await page.waitForSelector('body[data-state="done"]', { timeout: 1_800_000 });
  const speed = Number(await page.textContent('#speed'));
  const refreshed = Number(await page.getAttribute('#inside-view', 'data-shown'));
  await page.close();
  return { speed, refreshed };
}

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: chromiumFlags() });
const runs = [];
try {
  for (let i = 0; i < Number(pairs); i++) {
    const closed = await run(browser, false);
    const open = await run(browser, true);
    runs.push({ closed: closed.speed, open: open.speed, views_drawn: open.refreshed });
  }
} finally {
  await browser.close();
}
const slowdowns = runs.map((r) => 1 - r.open / r.closed).sort((a, b) => a - b);
console.log(JSON.stringify({ backend, query, copies, runs, median_slowdown: slowdowns[Math.floor(slowdowns.length / 2)] }));
