// Trains webtrain's `lenet` with TensorFlow.js for warmup + steps steps and publishes the
// timings as window.benchResult. Any failure is published too (ok:false, error), so the
// harness records why a backend has no number instead of timing out.
'use strict';

const query = new URLSearchParams(location.search);
const backend = query.get('backend') ?? 'webgpu';
const intParam = (name, fallback, min) => {
  const value = Number(query.get(name) ?? fallback);
  if (!Number.isInteger(value) || value < min) {
    throw new Error(`bad ${name}: ${query.get(name)}`);
  }
  return value;
};

const MNIST = '/data/mnist/';
const WASM_DIST = '/bench/node_modules/@tensorflow/tfjs-backend-wasm/dist/';
const MEAN = 0.1307;
const STD = 0.3081;

async function fetchBytes(name) {
  const response = await fetch(MNIST + name);
  if (!response.ok) throw new Error(`${MNIST}${name}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

// Raw IDX: big-endian magic and sizes; images have a 16-byte header, labels an 8-byte one.
async function loadMnist() {
  const [images, labels] = await Promise.all([
    fetchBytes('train-images-idx3-ubyte'), fetchBytes('train-labels-idx1-ubyte')]);
  const imageHeader = new DataView(images.buffer);
  const labelHeader = new DataView(labels.buffer);
  if (imageHeader.getUint32(0) !== 2051 || labelHeader.getUint32(0) !== 2049) {
    throw new Error('MNIST files are not raw IDX (gzipped?)');
  }
  const count = imageHeader.getUint32(4);
  if (labelHeader.getUint32(4) !== count) throw new Error('MNIST image/label counts differ');
  return { pixels: images.subarray(16), labels: labels.subarray(8), count };
}

// Seeded (mulberry32) so every backend trains on the same batches.
function shuffled(count, seed) {
  let state = seed >>> 0;
  const random = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const order = Uint32Array.from({ length: count }, (_, i) => i);
  for (let i = count - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

// Normalised NHWC pixels and class ids for consecutive batches of the shuffled order, built on
// the host before any timing.
function batches(mnist, batch, count) {
  const order = shuffled(mnist.count, 1);
  return Array.from({ length: count }, (_, b) => {
    const x = new Float32Array(batch * 784);
    const y = new Int32Array(batch);
    for (let i = 0; i < batch; i++) {
      const sample = order[(b * batch + i) % mnist.count];
      for (let p = 0; p < 784; p++) x[i * 784 + p] = (mnist.pixels[sample * 784 + p] / 255 - MEAN) / STD;
      y[i] = mnist.labels[sample];
    }
    return { x, y };
  });
}

// webtrain's lenet, NHWC. The last layer gives logits; the loss applies the softmax.
// Seeded weights (drawn in JS, so identical on every backend) make first_loss comparable.
function lenet() {
  const init = (seed) => ({ kernelInitializer: tf.initializers.glorotUniform({ seed }) });
  return tf.sequential({ layers: [
    tf.layers.conv2d({ inputShape: [28, 28, 1], filters: 20, kernelSize: 5, padding: 'valid', activation: 'relu', ...init(1) }),
    tf.layers.maxPooling2d({ poolSize: 2, strides: 2 }),
    tf.layers.conv2d({ filters: 50, kernelSize: 5, padding: 'valid', activation: 'relu', ...init(2) }),
    tf.layers.maxPooling2d({ poolSize: 2, strides: 2 }),
    tf.layers.flatten(),
    tf.layers.dense({ units: 500, activation: 'relu', ...init(3) }),
    tf.layers.dense({ units: 10, ...init(4) }),
  ] });
}

// tf.setBackend reports a failed initialisation only as `false` plus console.warn lines;
// keep those lines as the error message.
async function useBackend(name) {
  // TF.js's own message for a missing adapter is "Cannot read properties of null".
  if (name === 'webgpu' && !(await navigator.gpu?.requestAdapter())) {
    throw new Error(navigator.gpu ? 'WebGPU: requestAdapter() gave no adapter' : 'WebGPU: no navigator.gpu');
  }
  tf.wasm.setWasmPaths(WASM_DIST);
  const warnings = [];
  const warn = console.warn;
  // First lines only: the rest are minified stack frames.
  console.warn = (...args) => { warnings.push(args.join(' ').split('\n')[0]); warn.apply(console, args); };
  try {
    if (!(await tf.setBackend(name))) {
      throw new Error(`tf.setBackend('${name}') failed: ${warnings.join(' | ') || 'no reason given'}`);
    }
    await tf.ready();
  } finally {
    console.warn = warn;
  }
  checkBackend(name);
}

// TF.js may fall back to another registered backend without throwing; a number measured on
// the wrong backend would be worse than none.
function checkBackend(name) {
  if (tf.getBackend() !== name) throw new Error(`asked for backend '${name}', running on '${tf.getBackend()}'`);
}

async function run() {
  const warmup = intParam('warmup', 2, 0);
  const steps = intParam('steps', 5, 1);
  const batch = intParam('batch', 64, 1);
  await useBackend(backend);

  const data = batches(await loadMnist(), batch, warmup + steps);
  const model = lenet();
  // Same update as PyTorch SGD(lr=0.01, momentum=0.9): v = 0.9 v + g; w -= 0.01 v.
  const optimizer = tf.train.momentum(0.01, 0.9);

  const losses = [];
  const stepMs = [];
  // The WebGPU calls of the timed steps, when the harness counts them (bench/gpu_counts.js).
  const counted = () => globalThis.gpuCounts && { ...globalThis.gpuCounts };
  let before;
  for (let step = 0; step < warmup + steps; step++) {
    if (step === warmup) before = counted();
    const start = performance.now();
    // The host-to-device upload is part of the step: TF.js uploads lazily on first use anyway.
    const x = tf.tensor4d(data[step].x, [batch, 28, 28, 1]);
    const y = tf.tidy(() => tf.oneHot(tf.tensor1d(data[step].y, 'int32'), 10).cast('float32'));
    const loss = optimizer.minimize(
      () => tf.losses.softmaxCrossEntropy(y, model.apply(x, { training: true })), true);
    // Reading the loss back waits for the whole step to finish on the device.
    const [value] = await loss.data();
    const ms = performance.now() - start;
    tf.dispose([x, y, loss]);
    if (!Number.isFinite(value)) throw new Error(`step ${step}: loss ${value}`);
    losses.push(value);
    if (step >= warmup) stepMs.push(ms);
  }
  checkBackend(backend);
  const after = counted();
  const gpuPerStep = backend === 'webgpu' && before && after
    ? Object.fromEntries(Object.keys(after).map((key) => [key, (after[key] - before[key]) / steps]))
    : null;

  const sorted = [...stepMs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  return {
    framework: 'tfjs', version: tf.version.tfjs, backend, ok: true, batch, warmup, steps,
    step_ms: stepMs, ms_per_step: median, samples_per_s: batch * 1000 / median,
    first_loss: losses[0], last_loss: losses[losses.length - 1],
    gpu_per_step: gpuPerStep && { ...gpuPerStep, steps, log_interval: 1 },
  };
}

run()
  .catch((error) => ({ framework: 'tfjs', backend, ok: false, error: String(error?.message ?? error) }))
  .then((result) => {
    window.benchResult = result;
    document.getElementById('result').textContent = JSON.stringify(result, null, 2);
  });
