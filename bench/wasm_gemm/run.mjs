// Runs the benchmark's wasm in headless Chromium (the e2e tests' playwright-core) and prints
// its figures: node run.mjs path/to/wasm_gemm_bench.wasm
import { readFileSync } from 'node:fs';
import { chromium } from '../../tests/e2e/node_modules/playwright-core/index.mjs';

const wasm = readFileSync(process.argv[2]).toString('base64');
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const page = await browser.newPage();
const lines = await page.evaluate(async (wasm) => {
  const bytes = Uint8Array.from(atob(wasm), (c) => c.charCodeAt(0));
  const { instance } = await WebAssembly.instantiate(bytes, { env: { now: () => performance.now() } });
  const e = instance.exports;
  const shapes = [0, 1, 2, 3, 4, 5].map((i) => [0, 1, 2].map((axis) => e.shape_dim(i, axis)));
  const lines = [navigator.userAgent];
  // The first calls run in V8's baseline tier: each figure is the best of three.
  const best = (f) => Math.max(f(), f(), f()).toFixed(1);
  shapes.forEach(([m, n, k], i) => lines.push(`gemm ${m}x${k} · ${k}x${n}: ${best(() => e.gemm_gflops(i))} GFLOP/s`));
  lines.push(`12x4 microkernel, inner loop: mul+add ${best(() => e.microkernel_gflops(0, 50000))}, relaxed madd ${best(() => e.microkernel_gflops(1, 50000))} GFLOP/s`);
  lines.push(`register-only peak: mul+add ${best(() => e.peak_gflops(0, 20000000))}, relaxed madd ${best(() => e.peak_gflops(1, 20000000))} GFLOP/s`);
  return lines;
}, wasm);
console.log(lines.join('\n'));
await browser.close();
