// How long the page takes to build its WebGPU kernels on a first visit, after a reload, and on
// a second visit (a new browser on the same profile): what Chromium's GPU caches keep between
// them. Reads the page's own "kernels built in N s" (src/session/warm_up.rs), and times Start
// to the first step shown, with Start clicked once the kernels are built and at once.
//   node bench/second_visit.mjs WEBTRAIN_URL
// Prints one JSON object.
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromiumFlags } from './tfjs.mjs';

const base = (process.argv[2] ?? 'http://127.0.0.1:8090').replace(/\/$/, '');
const query = '?epochs=1&train_limit=640&test_limit=100&backend=gpu';
const profile = mkdtempSync(join(tmpdir(), 'webtrain-visit-'));

async function visit(context, atOnce) {
  const page = context.pages()[0] ?? await context.newPage();
  const loading = Date.now();
  await page.goto(`${base}/${query}`);
  await page.waitForSelector('body[data-state="ready"]', { timeout: 300_000 });
  if (!atOnce) await page.waitForSelector('#kernels[data-done]', { state: 'attached', timeout: 300_000 });
  const ready_ms = Date.now() - loading;
  const clicked = Date.now();
  await page.click('#start');
  await page.waitForFunction(() => Number(document.querySelector('#step').textContent) >= 1, null, { timeout: 300_000 });
  const first_step_ms = Date.now() - clicked;
  await page.waitForSelector('#kernels[data-done]', { state: 'attached', timeout: 300_000 });
  const kernels = (await page.textContent('#kernels')).trim();
  await page.click('#stop').catch(() => {});
  return { at_once: atOnce, ready_ms, first_step_ms, kernels };
}

const launch = () => chromium.launchPersistentContext(profile, {
  executablePath: '/usr/bin/chromium', headless: true, args: chromiumFlags(),
});
const visits = {};
try {
  let context = await launch();
  visits.first = await visit(context, false);
  visits.reload = await visit(context, false);
  visits.reload_at_once = await visit(context, true);
  await context.close();
  context = await launch();
  visits.second_browser = await visit(context, false);
  visits.second_browser_at_once = await visit(context, true);
  await context.close();
} finally {
  rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify(visits));
