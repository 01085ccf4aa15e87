// The page's service worker, with the two jobs a scope has one worker for:
//
// - Cross-origin isolation on any host. The CPU backend's threads share the training worker's
//   memory, which the browser allows only in a cross-origin isolated page: one served with
//   COOP and COEP. A static host that cannot send them (GitHub Pages among them) gets them
//   from here: every response of the page's own origin is given the headers Trunk.toml's
//   [serve.headers] names that it lacks. A host that sends them is left alone.
// - Offline, or the host down. The build's files are kept in a cache of this build and this
//   scope; each request goes to the host first (past the HTTP cache), and a file the build
//   keeps comes from that cache when the host cannot be reached, answers an error (404, 5xx)
//   or says nothing for TIMEOUT_MS. So a page online is never served an older build's files,
//   and a page offline is served one build whole. A new build (a new hash: this file changes)
//   keeps its files, then deletes the older caches of its scope: another deployment on the
//   same origin (/webtrain/ beside /fork/) keeps its own. MNIST is kept by the training
//   worker itself (src/worker/cache.rs).
//
// scripts/post-build.py writes the build's hash, its files and the headers in.
const BUILD = 'BUILD';
const FILES = ['FILES'];
const HEADERS = {'HEADERS': ''};
const PREFIX = 'webtrain-app';
// A cache's name: the prefix, the scope (a URL, which has no space) and the build.
const CACHE = `${PREFIX} ${self.registration.scope} ${BUILD}`;
// How long a request for a kept file waits for the host's answer before the kept copy is
// served: a host that accepts the connection and then says nothing holds the page otherwise.
const TIMEOUT_MS = 10_000;
// The URLs the build keeps, as a request names them.
const KEPT = new Set(FILES.map((file) => new URL(file, self.registration.scope).href));

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
    const names = await caches.keys();
    const older = await Promise.all(names.map(async (name) => name !== CACHE && await isOurs(name)));
    await Promise.all(names.filter((_, i) => older[i]).map((name) => caches.delete(name)));
    await self.clients.claim();
  })());
});

// Whether the cache `name` is an older build's of this scope: named so, or named as builds
// before the scope was in the name were (`webtrain-app-<build>`) and holding this scope's page.
async function isOurs(name) {
  const [prefix, scope] = name.split(' ');
  if (prefix === PREFIX) return scope === self.registration.scope;
  if (!/^webtrain-app-[0-9a-f]+$/.test(name)) return false;
  return (await (await caches.open(name)).match(self.registration.scope)) !== undefined;
}

self.addEventListener('fetch', (event) => {
  const { request } = event;
  if (request.method !== 'GET' || new URL(request.url).origin !== self.location.origin) return;
  event.respondWith(respond(request));
});

async function respond(request) {
  const url = new URL(request.url);
  // A navigation's settings are in its query: any of them opens the page kept. The page
  // `webtrain ui` serves (its token in the query) is its engine's, never a static build's.
  const navigation = request.mode === 'navigate';
  const engines = navigation && url.searchParams.has('token');
  if (navigation) url.search = '';
  const kept = !engines && KEPT.has(url.href);
  let response;
  try {
    // Checked with the host (a 304 when unchanged): the page's file names are the same in every
    // build, and a file the HTTP cache still holds from an older build would join a newer page.
    response = await fromHost(request, kept);
  } catch (unreachable) {
    response = undefined;
  }
  // No answer, or an error of the host's: the kept copy. A redirect or a 403 is the host's word.
  const failed = !response || response.status === 404 || response.status >= 500;
  if (kept && failed) {
    // Looked up by name, not opened: a cache a newer build deleted is not made again, empty.
    const copy = await caches.match(url.href, { cacheName: CACHE });
    if (copy) return isolated(copy);
  }
  // A file the build does not keep gets the host's answer, whatever it is.
  return response ? isolated(response) : Response.error();
}

// The host's answer to `request`; for a kept file, a host silent for TIMEOUT_MS is given up on
// (the request aborted, so that nothing of this worker waits on it).
async function fromHost(request, kept) {
  if (!kept) return fetch(request, { cache: 'no-cache' });
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), TIMEOUT_MS);
  try {
    return await fetch(request, { cache: 'no-cache', signal: abort.signal });
  } finally {
    clearTimeout(timer);
  }
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
