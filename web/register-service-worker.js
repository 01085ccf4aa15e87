// Registers the page's service worker (service-worker.js): the page offline, and cross-origin
// isolated on a host that does not send COOP and COEP. On such a host the first visit is not
// isolated yet: once the worker controls the page, one reload makes it so. A page still not
// isolated after that reload (a host whose headers forbid it, a browser that refuses, a hard
// reload past the worker) is not reloaded again while the tab lasts: it trains on one CPU
// thread and its backend line says why.
const RELOADED = 'webtrain-isolation-reload';

if ('serviceWorker' in navigator) {
  const reload = () => {
    if (window.crossOriginIsolated || sessionStorage.getItem(RELOADED) !== null) return;
    sessionStorage.setItem(RELOADED, '1');
    location.reload();
  };
  navigator.serviceWorker.register('./service-worker.js').then(() => {
    if (window.crossOriginIsolated) return sessionStorage.removeItem(RELOADED);
    if (navigator.serviceWorker.controller) return reload();
    navigator.serviceWorker.addEventListener('controllerchange', reload, { once: true });
  }, (error) => console.warn(`webtrain: no service worker, so no offline use: ${error}`));
}
