// The in-browser half of `make bench`, in Debian's headless Chromium with the WebGPU flags of
// webdriver.json: webtrain's own page on each backend, then TensorFlow.js (tfjs.mjs).
//   node bench/browser.mjs WEBTRAIN_URL TFJS_URL [warmup steps repeats]
// WEBTRAIN_URL serves a `trunk build --release` of the page, TFJS_URL the repository root.
// Prints one JSON object.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { benchTfjs, chromiumFlags } from './tfjs.mjs';

export const GPU_COUNTS = readFileSync(new URL('gpu_counts.js', import.meta.url), 'utf8');

// The page's worker script, with the WebGPU counters installed first and the totals kept at
// each step the worker reports (src/worker's Step events), in globalThis.stepCounts.
export const countedWorker = (timing) => `globalThis.gpuTiming = ${timing};
${GPU_COUNTS}
globalThis.stepCounts = {};
globalThis.gpuStep = 1;
const post = self.postMessage.bind(self);
const benchAnswers = {};
self.postMessage = (message, transfer) => {
  if (message?.id in benchAnswers) return benchAnswers[message.id](JSON.parse(message.message));
  if (globalThis.gpuCounts && typeof message?.message === 'string' && message.message.startsWith('{"Progress":{"Step"')) {
    const step = JSON.parse(message.message).Progress.Step;
    globalThis.gpuStep = step.step + 1;
    globalThis.stepCounts[step.step] = {
      ...globalThis.gpuCounts, kernels: { ...globalThis.gpuKernels }, logged: step.loss != null,
    };
  }
  return post(message, transfer);
};
// Asks the worker as the page would, for the harness alone: the answer never reaches the page.
let benchId = 2 ** 31;
globalThis.askWorker = (request) => new Promise((resolve) => {
  const id = benchId++;
  benchAnswers[id] = resolve;
  self.dispatchEvent(new MessageEvent('message', { data: { id, message: JSON.stringify(request), payloads: [] } }));
});
const { default: init } = await import('./webtrain.js');
await init();
`;

// What each step cost the device on average from step `from` to step `to`, and the readbacks,
// submits and dispatches of steps that neither log nor checkpoint (the step after a logged one takes its
// checkpoint's read).
export function perStep(counts, from, to) {
  if (!counts?.[from] || !counts?.[to]) return null;
  const average = {};
  for (const key of ['dispatches', 'submits', 'uploads', 'upload_bytes', 'readbacks', 'pipelines']) {
    average[key] = (counts[to][key] - counts[from][key]) / (to - from);
  }
  let [quiet, quietSteps, quietSubmits, quietDispatches] = [0, 0, 0, 0];
  for (let step = from + 1; step <= to; step++) {
    if (!counts[step].logged && !counts[step - 1].logged) {
      quiet += counts[step].readbacks - counts[step - 1].readbacks;
      quietSubmits += counts[step].submits - counts[step - 1].submits;
      quietDispatches += counts[step].dispatches - counts[step - 1].dispatches;
      quietSteps++;
    }
  }
  return {
    ...average, steps: to - from, readbacks_on_quiet_steps: quiet,
    submits_per_quiet_step: quietSteps ? quietSubmits / quietSteps : null,
    dispatches_per_quiet_step: quietSteps ? quietDispatches / quietSteps : null,
    kernels: kernelFamilies(counts[from].kernels, counts[to].kernels, to - from),
  };
}

// The kernel family of a pipeline's label: without its element types, vectorisation and hash
// ("kernel_scalar_binop_c_f32_n_4_ab71597d" → "kernel_scalar_binop", "elemwise_fuse_b7572f1b"
// → "elemwise_fuse").
const family = (label) => label.split(/_(?:t|e|c|f|in|lhs)_/)[0].replace(/_[0-9a-f]{8}$/, '');

// Dispatches per step by kernel family.
function kernelFamilies(before, after, steps) {
  const families = {};
  for (const [label, count] of Object.entries(after)) {
    families[family(label)] = (families[family(label)] ?? 0) + (count - (before[label] ?? 0)) / steps;
  }
  return Object.fromEntries(Object.entries(families).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]));
}

// GPU time per step by kernel family over steps from + 1 … to, from the timestamps each
// dispatch wrote (gpu_counts.js, gpuTiming): a family's time is its dispatches' sum.
function kernelTimes(times, from, to) {
  if (!times?.length) return null;
  const steps = to - from;
  const families = {};
  let total = 0;
  for (const [step, label, ns] of times) {
    if (step <= from || step > to) continue;
    const row = (families[family(label)] ??= { dispatches: 0, ms: 0 });
    row.dispatches += 1 / steps;
    row.ms += ns / 1e6 / steps;
    total += ns / 1e6 / steps;
  }
  const kernels = Object.entries(families).sort((a, b) => b[1].ms - a[1].ms)
    .map(([name, row]) => ({ name, dispatches_per_step: row.dispatches, ms_per_step: row.ms }));
  return { steps, kernel_ms_per_step: total, kernels };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

// The worker script with the counting wrapper, and the real response's headers: the worker
// takes its cross-origin isolation (COEP), and with it the CPU backend's threads, from them.
async function withCountedWorker(route, timing) {
  const response = await route.fetch();
  await route.fulfill({ response, contentType: 'text/javascript', body: countedWorker(timing) });
}

// The page's training worker; the CPU backend's threads are workers too (blob: URLs).
const trainingWorker = (page) => page.workers().find((w) => new URL(w.url()).pathname === '/worker.js');

// Times the page as a user meets it: Start clicked, steps shown. The loss is read back every
// `steps` steps, so windows run between steps at which the device has caught up.
// With `timing`, each dispatch is also timed on the GPU (a run of its own: timing adds work).
// With `warm`, Start waits until the page has built the GPU's kernels (src/session/warm_up.rs), as it
// does for a user who looks at the page first; `kernels_built_ms` says when, from loading.
export async function benchPage(browser, base, backend, { warmup, steps, repeats, timing = false, warm = false }) {
  const first = Math.max(1, Math.ceil(warmup / steps)) * steps;
  // Step numbers count from 1: the loss of batch b is read at step b + 1.
  const marks = Array.from({ length: repeats + 1 }, (_, i) => first + 1 + i * steps);
  const last = marks[marks.length - 1];
  const query = `?epochs=1&train_limit=${(last + 1) * 64}&test_limit=100&batch_size=64`
    + `&log_interval=${steps}&backend=${backend}`;
  // Service workers blocked: a page the page's own service worker controls fetches worker.js
  // through it, past page.route and so past the counting.
  const page = await browser.newPage({ serviceWorkers: 'block' });
  await page.route('**/worker.js', (route) => withCountedWorker(route, timing));
  try {
    const loading = Date.now();
    await page.goto(`${base}/${query}`);
    await page.waitForSelector('body[data-state="ready"]', { timeout: 300_000 });
    if (warm) await page.waitForSelector('#kernels[data-done]', { state: 'attached', timeout: 300_000 });
    const kernelsBuiltMs = warm ? Date.now() - loading : null;
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
    const counts = await trainingWorker(page)?.evaluate(() => globalThis.stepCounts).catch(() => null);
    // The last timestamps are read back a moment after their submit.
    if (timing) await page.waitForTimeout(2000);
    const times = timing
      ? await trainingWorker(page)?.evaluate(() => globalThis.gpuTimingOn && globalThis.gpuTimes).catch(() => null)
      : null;
    await page.click('#stop').catch(() => {});
    if (!(last in shown)) return { framework: 'webtrain', backend, adapter, ok: false, error: `page ${state}: ${error}` };
    const windowMs = marks.slice(1).map((m, i) => shown[m] - shown[marks[i]]);
    const ms = median(windowMs);
    return {
      framework: 'webtrain', backend, adapter, ok: true, batch: 64, warmup_steps: first + 1,
      steps_per_window: steps, window_ms: windowMs, ms_per_step: ms / steps,
      samples_per_s: (steps * 64 * 1000) / ms, first_step_ms: shown[1] - started,
      ...(warm ? { kernels_built_ms: kernelsBuiltMs } : {}),
      log_interval: steps, gpu_per_step: backend === 'gpu' ? perStep(counts, marks[0], last) : null,
      ...(timing ? { kernel_times: kernelTimes(times, marks[0], last) } : {}),
    };
  } finally {
    await page.close();
  }
}

// Where a CPU step's time goes in the page's worker (src/measure/op_profile.rs), on its MNIST.
export async function profilePageCpu(browser, base, repeats) {
  const page = await browser.newPage({ serviceWorkers: 'block' });
  await page.route('**/worker.js', (route) => withCountedWorker(route, false));
  try {
    await page.goto(`${base}/?backend=cpu`);
    await page.waitForSelector('body[data-state="ready"]', { timeout: 300_000 });
    const answer = await trainingWorker(page).evaluate(
      (repeats) => globalThis.askWorker({ ProfileCpu: { model: 'lenet', batch: 64, repeats } }), repeats);
    return answer.Answer ?? { error: JSON.stringify(answer) };
  } finally {
    await page.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  // notIsolatedUrl: the same page served without COOP and COEP, where its CPU backend has one thread.
  const [webtrainUrl, tfjsUrl, warmup = 20, steps = 50, repeats = 3, notIsolatedUrl] = process.argv.slice(2);
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: chromiumFlags() });
  try {
    const options = { warmup: Number(warmup), steps: Number(steps), repeats: Number(repeats) };
    const webtrain = [];
    for (const backend of ['gpu', 'cpu']) webtrain.push({ ...await benchPage(browser, webtrainUrl, backend, options), isolated: true });
    webtrain[1].ops = await profilePageCpu(browser, webtrainUrl, Number(steps));
    if (notIsolatedUrl) webtrain.push({ ...await benchPage(browser, notIsolatedUrl, 'cpu', options), isolated: false });
    // Where a WebGPU step's time goes: one window more, each dispatch timed.
    const timed = await benchPage(browser, webtrainUrl, 'gpu', { ...options, repeats: 1, timing: true });
    webtrain[0].kernel_times = timed.kernel_times ?? null;
    // Start once the page has built the kernels: a few steps say when the first one ends.
    const warmed = await benchPage(browser, webtrainUrl, 'gpu', { warmup: 1, steps: 2, repeats: 1, warm: true });
    Object.assign(webtrain[0], { first_step_warm_ms: warmed.first_step_ms ?? null, kernels_built_ms: warmed.kernels_built_ms ?? null });
    // TF.js takes seconds per step here: a few steps say enough.
    const tfjs = await benchTfjs(browser, tfjsUrl, { warmup: 2, steps: 5 });
    console.log(JSON.stringify({ chromium: browser.version(), webtrain, tfjs }));
  } finally {
    await browser.close();
  }
}
