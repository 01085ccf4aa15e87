// The in-browser half of `make soak`: the page trains as QUERY says; after each epoch the
// memory it reports (the worker's wasm memory, and the GPU memory burn reserves) and the main
// thread's JS heap are recorded. Prints one JSON object.
//   node bench/soak.mjs WEBTRAIN_URL QUERY
import { chromium } from 'playwright-core';
import { chromiumFlags } from './tfjs.mjs';

const [base, query] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: [...chromiumFlags(), '--enable-precise-memory-info'],
});
try {
  const page = await browser.newPage();
  await page.goto(`${base.replace(/\/$/, '')}/${query}`);
  await page.waitForSelector('body[data-state="ready"]', { timeout: 300_000 });
  await page.evaluate(() => {
    const memory = document.getElementById('memory');
    window.soak = [];
    new MutationObserver(() => {
      const { epoch, processBytes, deviceBytes } = memory.dataset;
      if (window.soak.some((e) => e.epoch === Number(epoch))) return;
      window.soak.push({
        epoch: Number(epoch),
        process_bytes: processBytes ? Number(processBytes) : null,
        device_bytes: deviceBytes ? Number(deviceBytes) : null,
        js_heap_bytes: performance.memory?.usedJSHeapSize ?? null,
      });
    }).observe(memory, { childList: true, characterData: true, subtree: true });
    document.getElementById('start').click();
  });
  await page.waitForFunction(() => !['training', 'paused'].includes(document.body.dataset.state), null,
    { timeout: 0, polling: 1000 });
  console.log(JSON.stringify(await page.evaluate(() => ({
    state: document.body.dataset.state,
    error: document.getElementById('error').textContent,
    adapter: document.getElementById('backend').textContent,
    epochs: window.soak,
  }))));
} finally {
  await browser.close();
}
