//! A user's own digits made into a run's data: a fifth held out to measure (at least one of
//! each digit that has two or more), and MNIST training images mixed into the rest so that
//! fine-tuning does not forget MNIST.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use crate::data::{Mnist, MnistSplit};
use crate::model::CLASSES;

/// The share of a collection held out to measure.
const HELD_OUT: f64 = 0.2;
/// The seed's stream for the hold-out, apart from the epochs' shuffles.
const HOLD_OUT_STREAM: u64 = 0x6f77_6e5f_6469_6769;
const MIX_STREAM: u64 = 0x6d69_785f_6d6e_6973;

/// `collection` as a run's data: a fifth of each digit held out as the test set (at least one
/// where the digit has two or more samples), the rest to train on, the seed choosing which.
pub fn hold_out(collection: &MnistSplit, seed: u64) -> Mnist {
    let mut rng = StdRng::seed_from_u64(seed ^ HOLD_OUT_STREAM);
    let (mut train, mut test) = (Vec::new(), Vec::new());
    for digit in 0..CLASSES as u8 {
        let mut of_digit: Vec<usize> = (0..collection.len())
            .filter(|&i| collection.label(i) == digit)
            .collect();
        of_digit.shuffle(&mut rng);
        let n = of_digit.len();
        let held = match n {
            0 | 1 => 0,
            n => ((n as f64 * HELD_OUT).round() as usize).max(1),
        };
        test.extend_from_slice(&of_digit[..held]);
        train.extend_from_slice(&of_digit[held..]);
    }
    train.sort_unstable();
    test.sort_unstable();
    Mnist {
        train: collection.select(&train),
        test: collection.select(&test),
    }
}

/// `own` with MNIST training images added so that they make `share` (0 to below 1) of the
/// result, drawn from `mnist` by the seed; all of `mnist` at most.
pub fn mix(own: &MnistSplit, mnist: &MnistSplit, share: f64, seed: u64) -> MnistSplit {
    if share <= 0.0 || mnist.is_empty() {
        return own.clone();
    }
    let wanted = (own.len() as f64 * share / (1.0 - share)).round() as usize;
    let mut order: Vec<usize> = (0..mnist.len()).collect();
    order.shuffle(&mut StdRng::seed_from_u64(seed ^ MIX_STREAM));
    order.truncate(wanted.min(mnist.len()));
    own.concat(&mnist.select(&order))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::IMAGE_PIXELS;

    /// `counts[d]` samples of each digit d, each image filled with its index.
    fn collection(counts: [usize; CLASSES]) -> MnistSplit {
        let labels: Vec<u8> = (0..CLASSES)
            .flat_map(|d| std::iter::repeat_n(d as u8, counts[d]))
            .collect();
        let images = (0..labels.len())
            .flat_map(|i| std::iter::repeat_n(i as u8, IMAGE_PIXELS))
            .collect();
        MnistSplit::from_parts(images, labels).unwrap()
    }

    #[test]
    fn a_fifth_of_each_digit_is_held_out_and_one_at_least_where_there_are_two() {
        let all = collection([10, 5, 2, 1, 0, 7, 3, 20, 4, 6]);
        let data = hold_out(&all, 1);
        let held = |d: u8| {
            (0..data.test.len())
                .filter(|&i| data.test.label(i) == d)
                .count()
        };
        let expected = [2, 1, 1, 0, 0, 1, 1, 4, 1, 1];
        for d in 0..CLASSES {
            assert_eq!(held(d as u8), expected[d], "digit {d}");
        }
        assert_eq!(data.train.len() + data.test.len(), all.len());
        // The same seed holds out the same samples; another seed others.
        assert_eq!(hold_out(&all, 1).test.image(0), data.test.image(0));
        let others = (0..20).any(|seed| hold_out(&all, seed).test.image(0) != data.test.image(0));
        assert!(others);
    }

    #[test]
    fn mnist_is_mixed_in_to_its_share() {
        let own = collection([3; CLASSES]);
        let mnist = collection([100; CLASSES]);
        let mixed = mix(&own, &mnist, 0.5, 1);
        assert_eq!(mixed.len(), 60);
        assert_eq!(mixed.image(0), own.image(0));
        assert_eq!(mix(&own, &mnist, 0.75, 1).len(), 120);
        assert_eq!(mix(&own, &mnist, 0.0, 1).len(), 30);
        assert_eq!(
            mix(&own, &mnist, 0.999, 1).len(),
            30 + 1000,
            "all of MNIST at most"
        );
    }
}
