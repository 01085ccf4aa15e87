// The training worker: the page's own wasm module, started again off the main thread. Its
// `main` finds no window here and runs the trainer (src/worker) instead of the page.
import init from './webtrain.js';

await init();
