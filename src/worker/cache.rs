//! MNIST's files kept by the browser (the Cache API), so that a reload, a second visit or a
//! visit offline downloads nothing. The worker reads them itself rather than leaving it to the
//! page's service worker (web/sw.js): a browser may let a worker's fetch skip the service
//! worker when offline. Where the browser keeps nothing (a private window may refuse), the
//! files are downloaded as before.

use js_sys::{Promise, Reflect};
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::Response;

/// The cache MNIST's files go in: apart from the page's own files, which each build of the
/// page replaces; MNIST never changes.
const MNIST_CACHE: &str = "webtrain-mnist";

#[wasm_bindgen]
extern "C" {
    // The Cache API's three calls used here, without web-sys's features for them.
    type CacheStorage;
    #[wasm_bindgen(method)]
    fn open(this: &CacheStorage, name: &str) -> Promise;
    #[wasm_bindgen(method)]
    fn delete(this: &CacheStorage, name: &str) -> Promise;
    type Cache;
    #[wasm_bindgen(method, js_name = match)]
    fn lookup(this: &Cache, url: &str) -> Promise;
    #[wasm_bindgen(method)]
    fn put(this: &Cache, url: &str, response: &Response) -> Promise;
}

fn storage() -> Option<CacheStorage> {
    let caches = Reflect::get(&js_sys::global(), &"caches".into()).ok()?;
    (!caches.is_undefined()).then(|| caches.unchecked_into())
}

/// The browser's cache of MNIST's files, when it keeps one.
pub struct MnistCache(Cache);

impl MnistCache {
    pub async fn open() -> Option<Self> {
        let opened = JsFuture::from(storage()?.open(MNIST_CACHE)).await.ok()?;
        Some(Self(opened.unchecked_into()))
    }

    /// The response kept for `url`, if any.
    pub async fn get(&self, url: &str) -> Option<Response> {
        let found = JsFuture::from(self.0.lookup(url)).await.ok()?;
        found.dyn_into().ok()
    }

    /// Keeps `response` (a copy of what was downloaded) for `url`; a cache that refuses it
    /// (its quota) leaves the next visit to download again.
    pub async fn put(&self, url: &str, response: &Response) {
        let _ = JsFuture::from(self.0.put(url, response)).await;
    }

    /// Forgets every file: they did not read as MNIST, and the next visit downloads them.
    pub async fn clear() {
        if let Some(storage) = storage() {
            let _: Result<JsValue, JsValue> = JsFuture::from(storage.delete(MNIST_CACHE)).await;
        }
    }
}
