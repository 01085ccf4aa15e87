//! The page's two engines: the browser's training worker, always, and `webtrain ui`'s native
//! engine when the page was opened from it (its URL carries the token). The backend select
//! names the engine and its device.

use std::fmt;
use std::rc::Rc;
use std::str::FromStr;

use web_sys::UrlSearchParams;

use super::error::PageError;
use super::trainer::Trainer;
use crate::config::DeviceList;
use crate::device::{BackendChoice, DeviceError};

/// The backend select's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineChoice {
    /// The browser's worker, on this device.
    Browser(BackendChoice),
    /// `webtrain ui`'s process, on the device its `--backend auto` would choose.
    Native,
    /// `webtrain ui`'s process, each batch split over every hardware GPU it has.
    NativeAllGpus,
}

impl EngineChoice {
    /// The device the engine is asked for.
    pub fn device(self) -> BackendChoice {
        match self {
            EngineChoice::Browser(choice) => choice,
            EngineChoice::Native | EngineChoice::NativeAllGpus => BackendChoice::Auto,
        }
    }

    /// The devices a run on this engine splits its batches over.
    pub fn devices(self) -> DeviceList {
        match self {
            EngineChoice::NativeAllGpus => DeviceList::All,
            _ => DeviceList::Auto,
        }
    }

    /// Whether `webtrain ui`'s process trains.
    pub fn is_native(self) -> bool {
        matches!(self, EngineChoice::Native | EngineChoice::NativeAllGpus)
    }
}

impl FromStr for EngineChoice {
    type Err = DeviceError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            "native" => Ok(EngineChoice::Native),
            "native-all" => Ok(EngineChoice::NativeAllGpus),
            other => other.parse().map(EngineChoice::Browser),
        }
    }
}

impl fmt::Display for EngineChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineChoice::Browser(choice) => choice.fmt(f),
            EngineChoice::Native => f.write_str("native"),
            EngineChoice::NativeAllGpus => f.write_str("native-all"),
        }
    }
}

/// The token of the `webtrain ui` that served the page, if one did.
pub fn token() -> Option<String> {
    let search = web_sys::window()?.location().search().ok()?;
    UrlSearchParams::new_with_str(&search).ok()?.get("token")
}

pub struct Engines {
    pub browser: Rc<Trainer>,
    pub native: Option<Rc<Trainer>>,
    /// Whether the native engine has a hardware GPU: then `auto` trains there.
    pub native_gpu: bool,
}

impl Engines {
    /// The browser's worker and, with a token, the native engine beside it.
    pub fn start(on_crash: fn(&str)) -> Result<Self, PageError> {
        let browser = Rc::new(Trainer::spawn(on_crash)?);
        let native = match token() {
            Some(token) => {
                let location = web_sys::window()
                    .map(|w| w.location())
                    .ok_or_else(|| PageError::Worker("no window".into()))?;
                let host = location.host().unwrap_or_default();
                let url = format!("ws://{host}/engine?token={token}");
                let native = Trainer::connect(&url, move |why| {
                    on_crash(&format!("{why}; is webtrain ui still running?"))
                })?;
                Some(Rc::new(native))
            }
            None => None,
        };
        Ok(Self {
            browser,
            native,
            native_gpu: false,
        })
    }

    /// The engine `choice` trains on.
    pub fn for_choice(&self, choice: EngineChoice) -> Result<Rc<Trainer>, PageError> {
        Ok(match (choice, &self.native) {
            (choice, Some(native)) if choice.is_native() => native.clone(),
            (choice, None) if choice.is_native() => return Err(PageError::NoNative),
            (EngineChoice::Browser(BackendChoice::Auto), Some(native)) if self.native_gpu => {
                native.clone()
            }
            _ => self.browser.clone(),
        })
    }
}
