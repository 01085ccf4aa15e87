// Counts the WebGPU calls that set a small model's step time on a real GPU: compute dispatches,
// queue submits, uploads (writeBuffer and buffers mapped at creation: count and bytes),
// readbacks (mapAsync for reading) and compute pipelines created. The benchmark harness
// installs it before the page's or the worker's own code runs; the product never loads it.
// Works in a window and in a worker; the totals are in globalThis.gpuCounts.
(() => {
  if (!globalThis.GPUDevice || globalThis.gpuCounts) return;
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
})();
