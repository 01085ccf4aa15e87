//! The IDX parser on arbitrary bytes: raw or gzip, images or labels, and a pair of them as a
//! split. Any input must end in `Ok` or a typed error, within the size limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use webtrain::data::{MnistSplit, parse_images, parse_labels};

fuzz_target!(|bytes: &[u8]| {
    let _ = parse_images("images", bytes);
    let _ = parse_labels("labels", bytes);
    // The first byte says where an images file ends and its labels file begins.
    if let Some((&cut, rest)) = bytes.split_first() {
        let (images, labels) = rest.split_at((cut as usize * rest.len() / 255).min(rest.len()));
        let _ = MnistSplit::from_idx("images", images, "labels", labels);
    }
});
