// The page with 100 kept runs of 2 epochs: every one drawn at once, re-sorted and redrawn with
// other options. Measures the page's main thread meanwhile (its longest task and event-loop gap)
// and the length of their records: a figure of `make bench`, its longest task wanted at 50 ms at most.
//   node bench/kept_runs.mjs WEBTRAIN_URL
// Prints one JSON object. The end-to-end tests import `keepRuns` and `drawAll` to check what
// the page does with as many runs; the figures are this benchmark's.
import { pathToFileURL } from 'node:url';

// `count` kept runs of lenet over 2 epochs of MNIST as a run keeps them (67 intervals an
// epoch, two test results), written straight into the page's IndexedDB. Runs in the page;
// gives the length of the records' JSON.
export function keepRuns(count) {
  const run = (n) => {
    const intervals = [];
    for (let step = 14; step <= 1876; step += 14) {
      const epoch = step <= 938 ? 1 : 2;
      intervals.push({ epoch, step, epochs: step / 938, steps: 14, samples: 896,
        loss: 2.3 / (1 + step / (50 + n)), accuracy: 100 - 90 / (1 + step / 100), training_secs: step / 40 });
    }
    const confusion = Array.from({ length: 10 }, (_, i) => Array.from({ length: 10 }, (_, j) => (i === j ? 980 : 2)));
    const report = (epoch) => ({ epoch, test_loss: 0.05, correct: 9800 + epoch * 20 + (n % 7), total: 10000, confusion });
    return {
      id: `kept-${n}`, name: `run ${n}`, engine: 'browser', failure: null,
      metrics: {
        config: { model: 'lenet', optimizer: 'sgd', lr: 0.001 * (1 + n), momentum: 0.9, batch_size: 64, epochs: 2,
          seed: n, log_interval: 100, train_limit: null, test_limit: null },
        backend: 'CPU, 2 threads', losses: [], intervals, total_steps: 1876, epochs: [report(1), report(2)],
        samples_per_sec: 1400 + n, outcome: 'completed', divergence: null, device_lost: null, memory: [],
        lr_changes: [], started_ms: 1796400000000 + n * 60000, training_secs: 47 + n,
      },
    };
  };
  return new Promise((resolve, reject) => {
    const open = indexedDB.open('webtrain', 3);
    open.onupgradeneeded = () => ['models', 'runs', 'run-weights', 'digits'].forEach((s) => open.result.createObjectStore(s));
    open.onerror = () => reject(open.error);
    open.onsuccess = () => {
      const tx = open.result.transaction('runs', 'readwrite');
      let length = 0;
      for (let n = 0; n < count; n++) {
        const record = JSON.stringify(run(n));
        length += record.length;
        tx.objectStore('runs').put(record, `kept-${n}`);
      }
      tx.oncomplete = () => resolve(length);
      tx.onerror = () => reject(tx.error);
    };
  });
}

// Every kept run of `page` (`count` of them) drawn, then re-sorted and drawn smoothed, on a
// log axis, against time: each a redraw of everything. Ends once the charts show the log axis.
export async function drawAll(page, count) {
  await page.click('#runs-table [data-action="select-all"]');
  await page.waitForFunction((count) => ['loss-chart', 'accuracy-chart']
    .every((id) => JSON.parse(document.getElementById(id).dataset.curves ?? '[]').length === count), count);
  await page.click('#runs-table [data-action="sort-best"]');
  await page.$eval('#smoothing', (input) => {
    input.value = '0.9';
    input.dispatchEvent(new Event('input'));
  });
  await page.selectOption('#x-axis', 'time');
  await page.check('#log-loss');
  // On the log axis each loss is drawn as its log10: every value of these runs is below 0.37.
  await page.waitForFunction((count) => {
    const loss = JSON.parse(document.getElementById('loss-chart').dataset.curves ?? '[]');
    return loss.length === count && loss.every((curve) => curve.every((y) => y < 0.37));
  }, count);
}

// Every main-thread task over 50 ms (the Long Tasks API), and the longest gap between two
// turns of the event loop, which also counts the shorter ones: from the page's start, in the
// page (an init script).
export function watchMainThread() {
  window.longTasks = [];
  new PerformanceObserver((list) => window.longTasks.push(...list.getEntries()))
    .observe({ type: 'longtask', buffered: true });
  window.loopGaps = [];
  let last = performance.now();
  const tick = () => {
    const now = performance.now();
    window.loopGaps.push([last, now - last]);
    last = now;
    setTimeout(tick, 0);
  };
  setTimeout(tick, 0);
}

// The main thread's long tasks and longest event-loop gap since `since` (performance.now()),
// in ms, as `watchMainThread` counted them.
export const mainThreadSince = (page, since) => page.evaluate((since) => ({
  longTasks: window.longTasks.filter((t) => t.startTime >= since).map((t) => t.duration),
  longestGap: Math.max(0, ...window.loopGaps.filter(([at]) => at >= since).map(([, gap]) => gap)),
}), since);

async function measure(base, count) {
  const { chromium } = await import('playwright-core');
  const { chromiumFlags } = await import('./tfjs.mjs');
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: chromiumFlags() });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.addInitScript(watchMainThread);
    const ready = () => page.waitForSelector('body[data-state="ready"]', { timeout: 180_000 });
    await page.goto(`${base}/?backend=cpu`);
    await ready();
    const stored = await page.evaluate(keepRuns, count);
    await page.reload();
    await ready();
    const since = await page.evaluate(() => performance.now());
    await drawAll(page, count);
    // Until the page has nothing left to do: the last redraw's tasks counted.
    await page.evaluate(() => new Promise((resolve) => requestIdleCallback(resolve, { timeout: 10_000 })));
    const { longTasks, longestGap } = await mainThreadSince(page, since);
    return {
      ok: true, runs: count, records_mb: stored / 1e6, tasks_over_50_ms: longTasks.length,
      longest_task_ms: Math.max(0, ...longTasks), longest_gap_ms: longestGap,
    };
  } finally {
    await browser.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const base = (process.argv[2] ?? 'http://127.0.0.1:8090').replace(/\/$/, '');
  try {
    console.log(JSON.stringify(await measure(base, 100)));
  } catch (error) {
    console.log(JSON.stringify({ ok: false, error: String(error) }));
  }
}
