// The page's service worker, with the two jobs a scope has one worker for:
//
// - Cross-origin isolation on any host. The CPU backend's threads share the training worker's
//   memory, which the browser allows only in a cross-origin isolated page: one served with
//   COOP and COEP. A static host that cannot send them (GitHub Pages among them) gets them
//   from here: every response of the page's own origin is given the headers Trunk.toml's
//   [serve.headers] names that it lacks. A host that sends them is left alone.
// - Offline. The build's files are kept in a cache named by the build's hash; each request
//   goes to the host first (past the HTTP cache) and to that cache when the network fails. So
//   a page online is never served an older build's files, and a page offline is served one
//   build whole. A new
//   build (a new hash: this file changes) keeps its files, then deletes the older caches.
//   MNIST is kept by the training worker itself (src/worker/cache.rs).
//
// scripts/post-build.py writes the build's hash, its files and the headers in.
const BUILD = 'BUILD';
const FILES = ['FILES'];
const HEADERS = {'HEADERS': ''};
const PREFIX = 'webtrain-app-';
const CACHE = PREFIX + BUILD;

self.addEventListener('install', (event) => {
  event.waitUntil((async () => {
    const cache = await caches.open(CACHE);
    // Past the HTTP cache: an older build's file must not be kept as this build's.
    await cache.addAll(FILES.map((file) => new Request(file, { cache: 'reload' })));
    await self.skipWaiting();
  })());
});

self.addEventListener('activate', (event) => {
  event.waitUntil((async () => {
    const older = (await caches.keys()).filter((name) => name.startsWith(PREFIX) && name !== CACHE);
    await Promise.all(older.map((name) => caches.delete(name)));
    await self.clients.claim();
  })());
});

self.addEventListener('fetch', (event) => {
  const { request } = event;
  if (request.method !== 'GET' || new URL(request.url).origin !== self.location.origin) return;
  event.respondWith(respond(request));
});

async function respond(request) {
  let response;
  try {
    // Checked with the host (a 304 when unchanged): the page's file names are the same in every
    // build, and a file the HTTP cache still holds from an older build would join a newer page.
    response = await fetch(request, { cache: 'no-cache' });
  } catch (offline) {
    // A link's settings are in its query: any of them opens the page kept.
    response = await caches.match(request, { ignoreSearch: request.mode === 'navigate' });
    if (!response) return Response.error();
  }
  return isolated(response);
}

// `response` with the headers it lacks.
function isolated(response) {
  // Another origin's, a redirect, an error: nothing to add to.
  if (response.type !== 'basic') return response;
  const headers = new Headers(response.headers);
  const missing = Object.entries(HEADERS).filter(([name]) => !headers.has(name));
  if (missing.length === 0) return response;
  for (const [name, value] of missing) headers.set(name, value);
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}
