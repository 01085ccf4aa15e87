// TensorFlow.js side of the benchmark: runs bench/tfjs/index.html once per backend.
// Needs the repository root served over HTTP (the page loads /bench/node_modules and /data/mnist):
//   python3 -m http.server 8091 --bind 127.0.0.1 --directory .
//   node bench/tfjs.mjs http://127.0.0.1:8091 [webgpu,webgl,cpu,wasm]   # one JSON line per backend
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

// On SwiftShader a step takes seconds; a backend gets a quarter of an hour before we give up.
const TIMEOUT_MS = 15 * 60_000;

export async function benchTfjs(browser, baseUrl, { backends = ['webgpu', 'webgl', 'cpu', 'wasm'], warmup = 2, steps = 5 } = {}) {
  const results = [];
  // One backend at a time, each in a fresh page (and context): backends must not share GPU
  // state or compete for the machine's cores.
  for (const backend of backends) {
    const page = await browser.newPage();
    // The WebGPU counters of bench/gpu_counts.js, before TF.js loads.
    await page.addInitScript({ path: new URL('gpu_counts.js', import.meta.url).pathname });
    const errors = [];
    page.on('pageerror', (error) => errors.push(error.message));
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    try {
      await page.goto(`${baseUrl}/bench/tfjs/index.html?backend=${backend}&warmup=${warmup}&steps=${steps}`);
      // Poll by timer: the default requestAnimationFrame polling stalls while the page computes.
      const handle = await page.waitForFunction(() => window.benchResult, null, { timeout: TIMEOUT_MS, polling: 1000 });
      results.push(await handle.jsonValue());
    } catch (error) {
      // A crash or a timeout still yields a row, with what the page said on the way.
      results.push({ framework: 'tfjs', backend, ok: false, error: [error.message, ...errors].join(' | ') });
    } finally {
      await page.close();
    }
  }
  return results;
}

// The Chromium flags the project's WebGPU tests use; Playwright adds its own headless flag.
export function chromiumFlags() {
  const config = JSON.parse(readFileSync(new URL('../webdriver.json', import.meta.url)));
  return config['goog:chromeOptions'].args.filter((flag) => !flag.startsWith('--headless'));
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const baseUrl = (process.argv[2] ?? 'http://127.0.0.1:8091').replace(/\/$/, '');
  const backends = process.argv[3]?.split(',');
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: chromiumFlags() });
  try {
    for (const result of await benchTfjs(browser, baseUrl, { backends })) console.log(JSON.stringify(result));
  } finally {
    await browser.close();
  }
}
