//! A user's own digits made into a run's data: a fifth held out to measure (at least one of
//! each digit that has two or more), and MNIST training images mixed into the rest so that
//! fine-tuning does not forget MNIST. Every engine and the CLI make it here.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use crate::data::{DataError, Mnist, MnistSplit};
use crate::model::CLASSES;

/// The share of a collection held out to measure.
const HELD_OUT: f64 = 0.2;
/// The seed's stream for the hold-out, apart from the epochs' shuffles.
const HOLD_OUT_STREAM: u64 = 0x6f77_6e5f_6469_6769;
const MIX_STREAM: u64 = 0x6d69_785f_6d6e_6973;

/// What a run on one's own digits trains and is tested on.
#[derive(Clone, Debug)]
pub struct OwnRun {
    /// One's own digits to train on, MNIST's training images mixed in; the held-out ones (or
    /// the test split given) to test on.
    pub data: Mnist,
    /// MNIST's test set, when MNIST is at hand: what a fine-tune must not forget.
    pub mnist_test: Option<MnistSplit>,
}

/// One's own digits as a run's data: tested on `test` when it is given, otherwise on a fifth of
/// each digit of `train` held out by the seed; MNIST's training images (from `mnist`) mixed
/// into the rest to make `share` of it.
pub fn own_run(
    train: &MnistSplit,
    test: Option<&MnistSplit>,
    mnist: Option<&Mnist>,
    share: f64,
    seed: u64,
) -> Result<OwnRun, DataError> {
    let mut data = match test {
        Some(test) => Mnist {
            train: train.clone(),
            test: test.clone(),
        },
        None => hold_out(train, seed),
    };
    if data.test.is_empty() {
        return Err(DataError::FewDigits);
    }
    match mnist {
        Some(mnist) => data.train = mix(&data.train, &mnist.train, share, seed),
        None if share > 0.0 => return Err(DataError::NothingToMix),
        None => {}
    }
    Ok(OwnRun {
        data,
        mnist_test: mnist.map(|mnist| mnist.test.clone()),
    })
}

/// `collection` as a run's data: a fifth of each digit held out as the test set (at least one
/// where the digit has two or more samples), the rest to train on, the seed choosing which.
fn hold_out(collection: &MnistSplit, seed: u64) -> Mnist {
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
fn mix(own: &MnistSplit, mnist: &MnistSplit, share: f64, seed: u64) -> MnistSplit {
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
        for (d, &want) in expected.iter().enumerate() {
            assert_eq!(held(d as u8), want, "digit {d}");
        }
        assert_eq!(data.train.len() + data.test.len(), all.len());
        // The same seed holds out the same samples; another seed others.
        assert_eq!(hold_out(&all, 1).test.image(0), data.test.image(0));
        let others = (0..20).any(|seed| hold_out(&all, seed).test.image(0) != data.test.image(0));
        assert!(others);
    }

    #[test]
    fn a_run_on_ones_own_digits_is_held_out_and_mixed_or_refused() {
        let own = collection([3; CLASSES]);
        let mnist = Mnist {
            train: collection([100; CLASSES]),
            test: collection([1; CLASSES]),
        };
        let run = own_run(&own, None, Some(&mnist), 0.5, 1).unwrap();
        assert_eq!(
            run.data.test.len(),
            CLASSES,
            "one of each digit's three held out"
        );
        assert_eq!(
            run.data.train.len(),
            2 * 2 * CLASSES,
            "as many of MNIST's mixed in"
        );
        assert_eq!(run.mnist_test.map(|t| t.len()), Some(CLASSES));
        // A test split given is the one tested on.
        let given = collection([1; CLASSES]);
        let run = own_run(&own, Some(&given), None, 0.0, 1).unwrap();
        assert_eq!((run.data.train.len(), run.data.test.len()), (30, 10));
        assert!(run.mnist_test.is_none());
        // Nothing to hold out, or MNIST's share without MNIST: refused, with why.
        let single = collection([1; CLASSES]);
        let few = own_run(&single, None, Some(&mnist), 0.5, 1).unwrap_err();
        assert!(matches!(few, DataError::FewDigits), "{few}");
        let unmixed = own_run(&own, None, None, 0.5, 1).unwrap_err();
        assert!(matches!(unmixed, DataError::NothingToMix), "{unmixed}");
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
