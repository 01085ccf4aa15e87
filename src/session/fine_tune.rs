//! Fine-tuning the current model on one's own digits, as the session runs it: the data (a
//! fifth held out, MNIST mixed in), the model measured before, and judged after.

use std::rc::Rc;

use burn::prelude::Device;

use super::protocol::{FineTuned, OwnDigits, Payload};
use super::{Host, Session, SessionError};
use crate::config::TrainConfig;
use crate::data::batcher::MnistBatcher;
use crate::data::own_digits::{hold_out, mix};
use crate::data::{Mnist, MnistSplit};
use crate::model::Net;
use crate::train::fine_tune::{Measured, changed, measure};

/// A fine-tune about to run: what it trains and is tested on, and the model before it.
pub(super) struct FineTune {
    pub(super) data: Rc<Mnist>,
    mnist_test: Option<MnistSplit>,
    before: Measured,
}

impl<H: Host> Session<H> {
    /// `own` as a run's data, and `start` (the current model) measured on it.
    pub(super) async fn fine_tune_data(
        &self,
        own: OwnDigits,
        config: &TrainConfig,
        start: Option<&Net>,
    ) -> Result<FineTune, SessionError> {
        let start = start.ok_or(SessionError::NoModel)?;
        let own = MnistSplit::from_parts(own.images.into_bytes(), own.labels.into_bytes())?;
        let mut data = hold_out(&own, config.seed);
        if data.test.is_empty() {
            return Err(SessionError::FewDigits);
        }
        let mnist = self.state.borrow().mnist.clone();
        if let Some(mnist) = &mnist {
            data.train = mix(&data.train, &mnist.train, config.mix_mnist, config.seed);
        } else if config.mix_mnist > 0.0 {
            return Err(SessionError::NothingToMix);
        }
        let mnist_test = mnist.map(|mnist| mnist.test.clone());
        let batcher = MnistBatcher::new(Device::flex());
        let before = measure(start, &data.test, mnist_test.as_ref(), &batcher).await?;
        Ok(FineTune {
            data: Rc::new(data),
            mnist_test,
            before,
        })
    }

    /// The current model, fresh from the fine-tune, against the model before it.
    pub(super) async fn judge(&self, fine_tune: &FineTune) -> Result<FineTuned, SessionError> {
        let model = self.model()?;
        let held_out = &fine_tune.data.test;
        let batcher = MnistBatcher::new(Device::flex());
        let after = measure(
            &model.net,
            held_out,
            fine_tune.mnist_test.as_ref(),
            &batcher,
        )
        .await?;
        let changed = changed(held_out, &fine_tune.before.held_out, &after.held_out);
        let images: Vec<u8> = changed
            .iter()
            .flat_map(|c| held_out.image(c.index))
            .copied()
            .collect();
        Ok(FineTuned {
            before: fine_tune.before.clone(),
            after,
            changed,
            changed_images: Payload::from(images),
        })
    }
}
