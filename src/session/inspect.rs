//! The views of the network: what one digit does inside the model, and where the test digits
//! lie, for the model a run trains (as its last log line's checkpoint holds it) or the current
//! one. Computed on the CPU backend, whatever trains: the GPU's run is not slowed by them.

use std::rc::Rc;

use burn::prelude::Device;

use super::protocol::{LookInside, LookedInside, MapDigits, MapOf, MappedDigits, Payload};
use super::{Host, Model, Session, SessionError};
use crate::data::IMAGE_PIXELS;
use crate::inspect::inside::look_inside;
use crate::inspect::projector::digit_map;
use crate::model::{NetConfig, model_from_weights};
use crate::weights::from_safetensors;

/// SmoothGrad's noise is drawn from this seed: the same digit gives the same map at each
/// refresh, so that what changes is the model.
const NOISE_SEED: u64 = 0;

/// Test digits a map places, at most: the whole test set.
const MAX_MAPPED: usize = 10_000;

impl<H: Host> Session<H> {
    /// The model the views look into, and the step of the run it is from: the run's at its
    /// last log line while one trains, else the current model.
    fn viewed_model(&self) -> Result<(Rc<Model>, Option<usize>), SessionError> {
        let latest = {
            let state = self.state.borrow();
            state.run.as_ref().and_then(|run| run.latest.clone())
        };
        match latest {
            Some(checkpoint) => {
                let net = model_from_weights(
                    checkpoint.config.model,
                    &checkpoint.weights,
                    &Device::flex(),
                )
                .map_err(|e| SessionError::RunFailed(e.to_string()))?;
                let kind = checkpoint.config.model;
                Ok((Rc::new(Model { net, kind }), Some(checkpoint.position.step)))
            }
            None => Ok((self.model()?, None)),
        }
    }

    pub(super) async fn look_inside(
        &self,
        request: LookInside,
    ) -> Result<LookedInside, SessionError> {
        let pixels = request.pixels.into_bytes();
        let pixels: &[u8; IMAGE_PIXELS] = (pixels.as_slice())
            .try_into()
            .map_err(|_| SessionError::DigitSize(pixels.len()))?;
        let (model, at_step) = self.viewed_model()?;
        let (class, smoothing) = (request.class, request.smoothing);
        let inside = look_inside(&model.net, pixels, class, smoothing, NOISE_SEED).await?;
        Ok(LookedInside {
            inside,
            model: model.kind,
            at_step,
        })
    }

    pub(super) async fn map_digits(
        &self,
        request: MapDigits,
    ) -> Result<MappedDigits, SessionError> {
        let data = self.data()?;
        let device = Device::flex();
        let net = match request.of {
            MapOf::Current => self.viewed_model()?.0.net.clone(),
            MapOf::Fresh { kind, seed } => NetConfig::from(kind).init(&device, seed),
            MapOf::Weights { kind, weights } => {
                from_safetensors(weights.into_bytes(), kind, &device)?
            }
        };
        let len = request.len.clamp(2, MAX_MAPPED);
        let map = digit_map(&net, &data.test, len).await?;
        let pixels = (0..map.labels.len()).flat_map(|index| data.test.image(index).iter().copied());
        Ok(MappedDigits {
            map,
            pixels: Payload::from(pixels.collect::<Vec<u8>>()),
        })
    }
}
