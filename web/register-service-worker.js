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

// Isolated now: the next page that is not may reload once again. Said before anything else,
// so that a page left at once (its registration still being checked) leaves no stale mark.
if (window.crossOriginIsolated) sessionStorage.removeItem(RELOADED);

if ('serviceWorker' in navigator) {
  const reload = () => {
    if (window.crossOriginIsolated || sessionStorage.getItem(RELOADED) !== null) return;
    const state = document.body?.dataset.state;
    if (state !== undefined && !IDLE.includes(state)) return;
    sessionStorage.setItem(RELOADED, '1');
    location.reload();
  };
  navigator.serviceWorker.register('./service-worker.js').then((registration) => {
    if (navigator.serviceWorker.controller) {
      registration.update().catch((error) => console.warn(`webtrain: no check for a new build: ${error}`));
    }
    if (window.crossOriginIsolated) return;
    if (navigator.serviceWorker.controller) return reload();
    navigator.serviceWorker.addEventListener('controllerchange', reload, { once: true });
  }, (error) => console.warn(`webtrain: no service worker, so no offline use: ${error}`));
}
