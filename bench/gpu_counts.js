// Counts the WebGPU calls that set a small model's step time on a real GPU: compute dispatches,
// queue submits, uploads (writeBuffer and buffers mapped at creation: count and bytes),
// readbacks (mapAsync for reading) and compute pipelines created. The benchmark harness
// installs it before the page's or the worker's own code runs; the product never loads it.
// Works in a window and in a worker; the totals are in globalThis.gpuCounts.
(() => {
  if (!globalThis.GPUDevice || globalThis.gpuCounts) return;
  const rawMapAsync = GPUBuffer.prototype.mapAsync;
  const counts = (globalThis.gpuCounts = {
    dispatches: 0, submits: 0, uploads: 0, upload_bytes: 0, readbacks: 0, pipelines: 0,
  });
  const wrap = (proto, name, count) => {
    const original = proto?.[name];
    if (!original) return;
    proto[name] = function (...args) {
      count(...args);
      return original.apply(this, args);
    };
  };
  const bytes = (data, offset = 0, size) => {
    const unit = data.BYTES_PER_ELEMENT ?? 1;
    return (size ?? data.byteLength / unit - offset) * unit;
  };
  // Dispatches by the label of the pipeline they run (the kernel's name where the library
  // labels its pipelines), in globalThis.gpuKernels.
  const kernels = (globalThis.gpuKernels = {});
  let pipeline = '';
  wrap(globalThis.GPUComputePassEncoder?.prototype, 'setPipeline', (p) => { pipeline = p?.label || '(unlabelled)'; });
  for (const name of ['dispatchWorkgroups', 'dispatchWorkgroupsIndirect']) {
    wrap(globalThis.GPUComputePassEncoder?.prototype, name, () => {
      counts.dispatches++;
      kernels[pipeline] = (kernels[pipeline] ?? 0) + 1;
    });
  }
  wrap(GPUQueue.prototype, 'submit', () => counts.submits++);
  wrap(GPUQueue.prototype, 'writeBuffer', (_buffer, _at, data, offset, size) => {
    counts.uploads++;
    counts.upload_bytes += bytes(data, offset, size);
  });
  wrap(GPUDevice.prototype, 'createBuffer', (descriptor) => {
    if (!descriptor?.mappedAtCreation) return;
    counts.uploads++;
    counts.upload_bytes += descriptor.size;
  });
  wrap(GPUBuffer.prototype, 'mapAsync', (mode) => {
    if (mode & GPUMapMode.READ) counts.readbacks++;
  });
  for (const name of ['createComputePipeline', 'createComputePipelineAsync']) {
    wrap(GPUDevice.prototype, name, () => counts.pipelines++);
  }
  if (globalThis.gpuTiming) timeEachDispatch(rawMapAsync, () => pipeline);
})();

// Opt-in (globalThis.gpuTiming = true before this script): each dispatch timed by GPU
// timestamps written around it inside its compute pass (Chromium's
// timestamp-query-inside-passes, which SwiftShader has), listed in globalThis.gpuTimes as
// [step, pipeline label, ns], the step read from globalThis.gpuStep. It adds commands and a
// readback per command buffer (not counted above), so counts and times come from separate runs.
function timeEachDispatch(rawMapAsync, currentLabel) {
  const FEATURES = ['timestamp-query', 'chromium-experimental-timestamp-query-inside-passes'];
  const CAPACITY = 4096; // queries per device: two per dispatch
  const times = (globalThis.gpuTimes = []);
  const owner = new WeakMap(); // encoder → device, pass → encoder
  const queries = new WeakMap(); // device → { set, next }
  const pending = new WeakMap(); // encoder → [[query, step, label]]
  const reads = new WeakMap(); // command buffer → what to read after its submit
  const patch = (proto, name, replace) => {
    const original = proto[name];
    proto[name] = function (...args) { return replace.call(this, original, args); };
  };
  patch(GPUAdapter.prototype, 'requestDevice', function (original, [descriptor = {}]) {
    if (FEATURES.every((f) => this.features.has(f))) {
      globalThis.gpuTimingOn = true;
      descriptor = { ...descriptor, requiredFeatures: [...(descriptor.requiredFeatures ?? []), ...FEATURES] };
    }
    return original.call(this, descriptor);
  });
  patch(GPUDevice.prototype, 'createCommandEncoder', function (original, args) {
    const encoder = original.apply(this, args);
    owner.set(encoder, this);
    return encoder;
  });
  patch(GPUCommandEncoder.prototype, 'beginComputePass', function (original, args) {
    const pass = original.apply(this, args);
    owner.set(pass, this);
    return pass;
  });
  patch(GPUComputePassEncoder.prototype, 'dispatchWorkgroups', function (original, args) {
    const encoder = owner.get(this);
    const device = owner.get(encoder);
    if (!device?.features.has(FEATURES[1])) return original.apply(this, args);
    let slots = queries.get(device);
    if (!slots) queries.set(device, (slots = { set: device.createQuerySet({ type: 'timestamp', count: CAPACITY }), next: 0 }));
    const at = slots.next;
    slots.next = (at + 2) % CAPACITY;
    this.writeTimestamp(slots.set, at);
    const result = original.apply(this, args);
    this.writeTimestamp(slots.set, at + 1);
    if (!pending.has(encoder)) pending.set(encoder, []);
    pending.get(encoder).push([at, globalThis.gpuStep ?? 0, currentLabel()]);
    return result;
  });
  // Each encoder resolves its own queries into a buffer of its own before it is finished: in
  // contiguous runs (the ring wraps), each at a 256-byte aligned offset as WebGPU requires.
  patch(GPUCommandEncoder.prototype, 'finish', function (original, args) {
    const list = pending.get(this);
    const device = owner.get(this);
    if (!list?.length) return original.apply(this, args);
    pending.delete(this);
    const runs = [];
    for (const [at] of list) {
      const run = runs[runs.length - 1];
      if (run && run.first + run.count === at) run.count += 2;
      else runs.push({ first: at, count: 2 });
    }
    let offset = 0;
    for (const run of runs) {
      run.offset = offset;
      offset += Math.ceil((run.count * 8) / 256) * 256;
    }
    const resolved = device.createBuffer({ size: offset, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
    const read = device.createBuffer({ size: offset, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const set = queries.get(device).set;
    for (const run of runs) this.resolveQuerySet(set, run.first, run.count, resolved, run.offset);
    this.copyBufferToBuffer(resolved, 0, read, 0, offset);
    const buffer = original.apply(this, args);
    // Where each query landed in `read`, in 8-byte units.
    const index = (at) => {
      const run = runs.find((r) => at >= r.first && at < r.first + r.count);
      return run.offset / 8 + (at - run.first);
    };
    reads.set(buffer, { read, resolved, list: list.map(([at, step, label]) => [index(at), step, label]) });
    return buffer;
  });
  patch(GPUQueue.prototype, 'submit', function (original, [buffers, ...rest]) {
    const result = original.call(this, buffers, ...rest);
    for (const buffer of buffers ?? []) {
      const info = reads.get(buffer);
      if (!info) continue;
      rawMapAsync.call(info.read, GPUMapMode.READ).then(() => {
        const ticks = new BigInt64Array(info.read.getMappedRange());
        for (const [i, step, label] of info.list) {
          const ns = Number(ticks[i + 1] - ticks[i]);
          if (ns >= 0) times.push([step, label, ns]);
        }
        info.read.destroy();
        info.resolved.destroy();
      }).catch(() => {});
    }
    return result;
  });
}
