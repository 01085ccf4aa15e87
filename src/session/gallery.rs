//! What the current model makes of the test digits: the gallery of its guesses and mistakes,
//! and the digits of one cell of the confusion matrix.

use std::rc::Rc;

use burn::prelude::Device;

use super::protocol::{Confused, GalleryDigit};
use super::{Host, Model, Session, SessionError};
use crate::data::Mnist;
use crate::data::batcher::MnistBatcher;
use crate::model::CLASSES;
use crate::platform::provoked_panic;
use crate::predict::{predicted, probabilities};

/// Test digits in the gallery: the first ones, then the first mistakes among the next.
const GALLERY_FIRST: usize = 24;
const GALLERY_MISTAKES: usize = 12;
const GALLERY_SEARCH: usize = 1000;
/// Digits shown for a cell of the confusion matrix.
const CONFUSED_SHOWN: usize = 48;

/// The current model's probabilities for the first test digits, kept for the next ask.
pub(super) struct Guesses {
    model: Rc<Model>,
    digits: Rc<Vec<[f32; CLASSES]>>,
}

impl<H: Host> Session<H> {
    /// The current model's probabilities for the first `len` test digits, kept for the next ask.
    async fn guesses(
        &self,
        len: usize,
    ) -> Result<(Rc<Model>, Rc<Mnist>, Rc<Vec<[f32; CLASSES]>>), SessionError> {
        let (model, data) = self.model_and_data()?;
        let len = data.test.len_within(Some(len));
        let kept = self.state.borrow().guesses.as_ref().and_then(|kept| {
            (Rc::ptr_eq(&kept.model, &model) && kept.digits.len() >= len)
                .then(|| kept.digits.clone())
        });
        if let Some(digits) = kept {
            return Ok((model, data, digits));
        }
        let batcher = MnistBatcher::new(Device::flex());
        let mut digits = Vec::with_capacity(len);
        // In slices: lenet's conv1 output alone is 46 KB a digit.
        for start in (0..len).step_by(GALLERY_SEARCH) {
            let pixels: Vec<u8> = (start..len.min(start + GALLERY_SEARCH))
                .flat_map(|i| data.test.image(i).iter().copied())
                .collect();
            digits.extend(probabilities(&model.net, &pixels, &batcher).await?);
        }
        let digits = Rc::new(digits);
        self.state.borrow_mut().guesses = Some(Guesses {
            model: model.clone(),
            digits: digits.clone(),
        });
        Ok((model, data, digits))
    }

    /// The current model's guesses on the first test digits and on some of its mistakes among the
    /// next.
    pub(super) async fn gallery(&self) -> Result<Vec<GalleryDigit>, SessionError> {
        let (_, data, guesses) = self.guesses(GALLERY_SEARCH).await?;
        provoked_panic("Gallery");
        let count = guesses.len().min(GALLERY_SEARCH);
        let wrong = |&i: &usize| predicted(&guesses[i]) != usize::from(data.test.label(i));
        let shown: Vec<usize> = (0..count.min(GALLERY_FIRST))
            .chain((GALLERY_FIRST..count).filter(wrong).take(GALLERY_MISTAKES))
            .collect();
        Ok(shown_digits(&data, &guesses, shown))
    }

    /// Up to `CONFUSED_SHOWN` of the first `len` test digits that are `truth` and taken for `guess`.
    pub(super) async fn confused(
        &self,
        request: Confused,
    ) -> Result<Vec<GalleryDigit>, SessionError> {
        let Confused { truth, guess, len } = request;
        let (_, data, guesses) = self.guesses(len).await?;
        let len = data.test.len_within(Some(len));
        let shown = (0..len)
            .filter(|&i| data.test.label(i) == truth && predicted(&guesses[i]) == guess)
            .take(CONFUSED_SHOWN)
            .collect();
        Ok(shown_digits(&data, &guesses, shown))
    }
}

fn shown_digit(data: &Mnist, guesses: &[[f32; CLASSES]], index: usize) -> GalleryDigit {
    let guess = predicted(&guesses[index]);
    GalleryDigit {
        index,
        truth: data.test.label(index),
        guess,
        probability: guesses[index][guess],
        pixels: data.test.image(index).to_vec().into(),
    }
}

fn shown_digits(data: &Mnist, guesses: &[[f32; CLASSES]], shown: Vec<usize>) -> Vec<GalleryDigit> {
    shown
        .into_iter()
        .map(|index| shown_digit(data, guesses, index))
        .collect()
}
