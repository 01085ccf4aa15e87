// What a background tab costs a run in the page: one long run, its step rate measured in
// windows with its tab in front and with another tab brought to the front, interleaved, in
// Debian's headless Chromium.
//   node bench/background.mjs WEBTRAIN_URL [backend] [pairs] [seconds] [query]
// WEBTRAIN_URL serves a build of the page. Prints one JSON object: each window's steps a second
// (the step number the page shows, read at the window's ends), whether the run's tab was
// hidden in it (document.visibilityState), and the median of background / front.
import { chromium } from 'playwright-core';
import { chromiumFlags } from './tfjs.mjs';

const [base = 'http://127.0.0.1:8090', backend = 'cpu', pairs = '3', seconds = '15',
  query = 'epochs=20&log_interval=10&model=lenet'] = process.argv.slice(2);
const windowMs = Number(seconds) * 1000;

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: chromiumFlags() });
const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, serviceWorkers: 'block' });
const page = await context.newPage();
const stepNow = async () => Number(await page.textContent('#step'));

async function window(hidden) {
  let other;
  if (hidden) {
    other = await context.newPage();
    await other.goto('about:blank');
    await other.bringToFront();
  } else {
    await page.bringToFront();
  }
  // The switch settles before the window opens.
  await new Promise((r) => setTimeout(r, 1000));
  const visibility = await page.evaluate(() => document.visibilityState);
  const [first, start] = [await stepNow(), Date.now()];
  await new Promise((r) => setTimeout(r, windowMs));
  const [last, end] = [await stepNow(), Date.now()];
  if (other) await other.close();
  return { hidden, visibility, steps_per_s: (last - first) / ((end - start) / 1000) };
}

const windows = [];
let said;
try {
  await page.goto(`${base.replace(/\/$/, '')}/?${query}&backend=${backend}`);
  await page.waitForSelector('body[data-state="ready"]', { timeout: 180_000 });
  await page.click('#start');
  // Past the first log line: the kernels built, the rate steady.
  await page.waitForFunction(() => Number(document.querySelector('#step').textContent) >= 20, null, { timeout: 600_000 });
  for (let i = 0; i < Number(pairs); i++) {
    windows.push(await window(false));
    windows.push(await window(true));
  }
  await page.bringToFront();
  await new Promise((r) => setTimeout(r, 500));
  said = (await page.textContent('#log')).split('\n').filter((line) => line.includes('background'));
  await page.click('#stop');
} finally {
  await browser.close();
}
const ratios = [];
for (let i = 0; i + 1 < windows.length; i += 2) ratios.push(windows[i + 1].steps_per_s / windows[i].steps_per_s);
ratios.sort((a, b) => a - b);
console.log(JSON.stringify({ backend, query, windows, ratios, median_ratio: ratios[Math.floor(ratios.length / 2)], said }));
