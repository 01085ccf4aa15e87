// Registers the page's service worker (service-worker.js): the page offline, and cross-origin
// isolated on a host that does not send COOP and COEP. On such a host the first visit is not
// isolated yet: once the worker controls the page, one reload makes it so, unless the page has
// started work by then (a run, the range test): that is never interrupted, and the next visit
// is isolated. A page still not isolated after that reload (a host whose headers forbid it, a
// browser that refuses, a hard reload past the worker) is not reloaded again while the tab
// lasts: it trains on one CPU thread and its backend line says why. A page a worker controls
// asks the host for a new build at once: the browser's own check after a navigation waits
// until the page's requests pause.
// Per deployment (its folder): two on one origin share a tab's sessionStorage.
const RELOADED = `webtrain-isolation-reload ${new URL('./', location.href).pathname}`;
// The page's phases (its body's data-state, src/page/phase.rs) in which a reload loses nothing.
const IDLE = ['loading', 'ready'];
// The page downloads MNIST once this settles: once it is known that the page will not be
// reloaded into isolation, whose reload would cut the download off midway (to begin again). A
// worker that takes longer than SETTLE_MS to take over (its script slow to come) holds the
// page no longer: its reload then waits for the next visit if a run has started.
const SETTLE_MS = 10_000;
let settle;
window.webtrainIsolation = new Promise((resolve) => {
  settle = resolve;
  setTimeout(resolve, SETTLE_MS);
});

// Isolated now: the next page that is not may reload once again. Said before anything else,
// so that a page left at once (its registration still being checked) leaves no stale mark.
if (window.crossOriginIsolated) {
  sessionStorage.removeItem(RELOADED);
  settle();
}

if ('serviceWorker' in navigator) {
  const reload = () => {
    if (window.crossOriginIsolated || sessionStorage.getItem(RELOADED) !== null) return settle();
    const state = document.body?.dataset.state;
    if (state !== undefined && !IDLE.includes(state)) return settle();
    sessionStorage.setItem(RELOADED, '1');
    location.reload();
  };
  navigator.serviceWorker.register('./service-worker.js').then((registration) => {
    // No registration: the browser (or its automation) refused it.
    if (!registration) return settle();
    if (navigator.serviceWorker.controller) {
      registration.update().catch((error) => console.warn(`webtrain: no check for a new build: ${error}`));
    }
    if (window.crossOriginIsolated) return;
    if (navigator.serviceWorker.controller) return reload();
    navigator.serviceWorker.addEventListener('controllerchange', reload, { once: true });
    // The worker that will take over: none where the active one does not control this page
    // (a hard reload), which it does from the next visit; one that fails to install never does.
    const activating = registration.active?.state === 'activating' ? registration.active : null;
    const coming = registration.installing ?? registration.waiting ?? activating;
    if (!coming) return settle();
    coming.addEventListener('statechange', () => coming.state === 'redundant' && settle());
  }, (error) => {
    console.warn(`webtrain: no service worker, so no offline use: ${error}`);
    settle();
  });
} else {
  settle();
}
