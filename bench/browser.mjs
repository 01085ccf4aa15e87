// The in-browser half of `make bench`, in Debian's headless Chromium with the WebGPU flags of
// webdriver.json: webtrain's own page on each backend, then TensorFlow.js (tfjs.mjs).
//   node bench/browser.mjs WEBTRAIN_URL TFJS_URL [warmup steps repeats]
// WEBTRAIN_URL serves a `trunk build --release` of the page, TFJS_URL the repository root.
// Prints one JSON object.
import { chromium } from 'playwright-core';
import { benchTfjs, chromiumFlags } from './tfjs.mjs';

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

// Times the page as a user meets it: Start clicked, steps shown. The loss is read back every
// `steps` steps, so windows run between steps at which the device has caught up.
async function benchPage(browser, base, backend, { warmup, steps, repeats }) {
  const first = Math.max(1, Math.ceil(warmup / steps)) * steps;
  // Step numbers count from 1: the loss of batch b is read at step b + 1.
  const marks = Array.from({ length: repeats + 1 }, (_, i) => first + 1 + i * steps);
  const last = marks[marks.length - 1];
  const query = `?epochs=1&train_limit=${(last + 1) * 64}&test_limit=100&batch_size=64`
    + `&log_interval=${steps}&backend=${backend}`;
  const page = await browser.newPage();
  try {
    await page.goto(`${base}/${query}`);
    await page.waitForSelector('body[data-state="ready"]', { timeout: 300_000 });
    await page.evaluate(() => {
      const step = document.getElementById('step');
      window.stepShown = {};
      // Observer callbacks run as microtasks right after the page writes the step number.
      new MutationObserver(() => {
        const n = Number(step.textContent);
        if (Number.isInteger(n) && !(n in window.stepShown)) window.stepShown[n] = performance.now();
      }).observe(step, { childList: true, characterData: true, subtree: true });
      window.startClicked = performance.now();
      document.getElementById('start').click();
    });
    await page.waitForFunction(
      (last) => last in window.stepShown || !['training', 'paused'].includes(document.body.dataset.state),
      last, { timeout: 1_800_000, polling: 500 });
    const { shown, started, state, adapter, error } = await page.evaluate(() => ({
      shown: window.stepShown, started: window.startClicked, state: document.body.dataset.state,
      adapter: document.getElementById('backend').textContent,
      error: document.getElementById('error').textContent,
    }));
    await page.click('#stop').catch(() => {});
    if (!(last in shown)) return { framework: 'webtrain', backend, adapter, ok: false, error: `page ${state}: ${error}` };
    const windowMs = marks.slice(1).map((m, i) => shown[m] - shown[marks[i]]);
    const ms = median(windowMs);
    return {
      framework: 'webtrain', backend, adapter, ok: true, batch: 64, warmup_steps: first + 1,
      steps_per_window: steps, window_ms: windowMs, ms_per_step: ms / steps,
      samples_per_s: (steps * 64 * 1000) / ms, first_step_ms: shown[1] - started,
    };
  } finally {
    await page.close();
  }
}

const [webtrainUrl, tfjsUrl, warmup = 20, steps = 50, repeats = 3] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: chromiumFlags() });
try {
  const options = { warmup: Number(warmup), steps: Number(steps), repeats: Number(repeats) };
  const webtrain = [];
  for (const backend of ['gpu', 'cpu']) webtrain.push(await benchPage(browser, webtrainUrl, backend, options));
  // TF.js takes seconds per step here: a few steps say enough.
  const tfjs = await benchTfjs(browser, tfjsUrl, { warmup: 2, steps: 5 });
  console.log(JSON.stringify({ chromium: browser.version(), webtrain, tfjs }));
} finally {
  await browser.close();
}
