//! Before and after a fine-tune: a model's guesses on the held-out digits, its accuracy there
//! and on MNIST's test set, and the held-out digits whose verdict changed.

use serde::{Deserialize, Serialize};

use crate::data::MnistSplit;
use crate::data::batcher::MnistBatcher;
use crate::model::Net;
use crate::predict::{predicted, probabilities};
use crate::train::{TrainError, evaluate};

/// Digits guessed per batch: the held-out set is small, MNIST's test set is not.
const GUESS_BATCH: usize = 1000;

/// A model's guesses on a split, one a sample.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Guesses {
    pub guesses: Vec<u8>,
    pub correct: usize,
}

impl Guesses {
    pub fn accuracy(&self) -> f64 {
        100.0 * self.correct as f64 / self.guesses.len().max(1) as f64
    }
}

/// `model`'s guess for every sample of `split`.
pub async fn guesses(
    model: &Net,
    split: &MnistSplit,
    batcher: &MnistBatcher,
) -> Result<Guesses, TrainError> {
    let mut found = Vec::with_capacity(split.len());
    let indices: Vec<usize> = (0..split.len()).collect();
    for chunk in indices.chunks(GUESS_BATCH) {
        let pixels: Vec<u8> = chunk
            .iter()
            .flat_map(|&i| split.image(i))
            .copied()
            .collect();
        let rows = probabilities(model, &pixels, batcher).await?;
        found.extend(rows.iter().map(|row| predicted(row) as u8));
    }
    let correct = (0..split.len())
        .filter(|&i| found[i] == split.label(i))
        .count();
    Ok(Guesses {
        guesses: found,
        correct,
    })
}

/// A model measured where a fine-tune is judged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// On the held-out part of the user's digits.
    pub held_out: Guesses,
    /// Accuracy (%) on MNIST's test set, when it is at hand.
    pub mnist_accuracy: Option<f64>,
}

/// Measures `model` on the held-out digits and, if given, MNIST's test set.
pub async fn measure(
    model: &Net,
    held_out: &MnistSplit,
    mnist_test: Option<&MnistSplit>,
    batcher: &MnistBatcher,
) -> Result<Measured, TrainError> {
    let mnist_accuracy = match mnist_test {
        Some(test) => Some(
            evaluate(model, test, test.len(), batcher, 0)
                .await?
                .accuracy(),
        ),
        None => None,
    };
    Ok(Measured {
        held_out: guesses(model, held_out, batcher).await?,
        mnist_accuracy,
    })
}

/// A held-out digit whose guess changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changed {
    pub index: usize,
    pub label: u8,
    pub before: u8,
    pub after: u8,
}

impl Changed {
    /// Whether the fine-tune put it right (rather than wrong).
    pub fn fixed(&self) -> bool {
        self.after == self.label
    }
}

/// The held-out digits whose guess differs between `before` and `after`.
pub fn changed(held_out: &MnistSplit, before: &Guesses, after: &Guesses) -> Vec<Changed> {
    (0..held_out.len())
        .filter(|&i| before.guesses[i] != after.guesses[i])
        .map(|index| Changed {
            index,
            label: held_out.label(index),
            before: before.guesses[index],
            after: after.guesses[index],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_changed_verdicts_are_those_that_differ() {
        let split = MnistSplit::from_parts(vec![0; 3 * 784], vec![1, 2, 3]).unwrap();
        let before = Guesses {
            guesses: vec![1, 5, 5],
            correct: 1,
        };
        let after = Guesses {
            guesses: vec![1, 2, 4],
            correct: 2,
        };
        let found = changed(&split, &before, &after);
        assert_eq!(found.len(), 2);
        assert!(found[0].fixed() && !found[1].fixed());
        assert_eq!((found[1].index, found[1].before, found[1].after), (2, 5, 4));
        assert!((after.accuracy() - 66.666).abs() < 0.01);
    }
}
