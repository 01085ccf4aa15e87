//! Any image of one digit brought into MNIST's own form, as MNIST's makers did: grey levels,
//! white ink on black (dark ink on light paper is inverted), cropped to its ink, fitted into a
//! 20×20 box keeping its aspect, then placed in 28×28 so that its centre of mass is the
//! image's centre. Drawings, uploads and the draw pad's guesses all go through it.

use thiserror::Error;

use crate::data::{IMAGE_PIXELS, IMAGE_SIDE as SIDE};

/// The box MNIST's digits are fitted into.
const BOX: usize = 20;
/// Larger than any photo of one digit needs to be.
pub const MAX_SIDE: usize = 4096;
/// Ink is what stands this far above the paper, out of 255, once the paper is black.
const INK: f32 = 48.0;
/// A digit's ink covers well under this share of its own bounding box; a photo, a texture or a
/// filled shape covers more.
const MAX_INK_SHARE: f32 = 0.75;

#[derive(Debug, Error, PartialEq)]
pub enum FormError {
    #[error("the image is {0}×{1} pixels; a digit image is 1 to {MAX_SIDE} pixels a side")]
    Size(usize, usize),
    #[error("{found} bytes is not a {width}×{height} image ({expected} bytes)")]
    Bytes {
        found: usize,
        expected: usize,
        width: usize,
        height: usize,
    },
    #[error("the image is blank: no ink stands out from the paper")]
    Blank,
    #[error(
        "this does not look like one digit: ink covers {0:.0}% of it (one dark digit on light paper, or a light one on dark)"
    )]
    NotADigit(f32),
}

/// A grey image, row by row.
struct Grey {
    width: usize,
    height: usize,
    pixels: Vec<f32>,
}

impl Grey {
    fn at(&self, x: usize, y: usize) -> f32 {
        self.pixels[y * self.width + x]
    }
}

/// An RGBA image (as a canvas gives it) in MNIST's form: 784 grey levels, ink white.
pub fn from_rgba(rgba: &[u8], width: usize, height: usize) -> Result<Vec<u8>, FormError> {
    check_size(width, height)?;
    check_bytes(rgba.len(), width * height * 4, width, height)?;
    // Luma as Rec. 601 weighs it, over white where the image is transparent (a drawing on a
    // transparent canvas is ink on paper).
    let pixels = rgba
        .chunks_exact(4)
        .map(|p| {
            let [r, g, b, a] = [p[0], p[1], p[2], p[3]].map(f32::from);
            let luma = 0.299 * r + 0.587 * g + 0.114 * b;
            let alpha = a / 255.0;
            luma * alpha + 255.0 * (1.0 - alpha)
        })
        .collect();
    from_grey(Grey {
        width,
        height,
        pixels,
    })
}

/// A grey image (0 black to 255 white), row by row, in MNIST's form.
pub fn from_grey_bytes(grey: &[u8], width: usize, height: usize) -> Result<Vec<u8>, FormError> {
    check_size(width, height)?;
    check_bytes(grey.len(), width * height, width, height)?;
    let pixels = grey.iter().map(|&p| f32::from(p)).collect();
    from_grey(Grey {
        width,
        height,
        pixels,
    })
}

fn check_size(width: usize, height: usize) -> Result<(), FormError> {
    match (1..=MAX_SIDE).contains(&width) && (1..=MAX_SIDE).contains(&height) {
        true => Ok(()),
        false => Err(FormError::Size(width, height)),
    }
}

fn check_bytes(
    found: usize,
    expected: usize,
    width: usize,
    height: usize,
) -> Result<(), FormError> {
    match found == expected {
        true => Ok(()),
        false => Err(FormError::Bytes {
            found,
            expected,
            width,
            height,
        }),
    }
}

fn from_grey(grey: Grey) -> Result<Vec<u8>, FormError> {
    let ink = ink_white(grey);
    let (left, top, right, bottom) = ink_box(&ink).ok_or(FormError::Blank)?;
    let (w, h) = (right - left, bottom - top);
    let inked = (top..bottom)
        .flat_map(|y| (left..right).map(move |x| (x, y)))
        .filter(|&(x, y)| ink.at(x, y) >= INK)
        .count();
    let share = inked as f32 / (w * h) as f32;
    // A digit of one stroke (a 1) fills its narrow box: only a box of some width can tell.
    if share > MAX_INK_SHARE && w.min(h) * 4 > w.max(h) && w.min(h) >= 4 {
        return Err(FormError::NotADigit(100.0 * share));
    }
    let fitted = fit(&ink, (left, top, w, h));
    Ok(centre_by_mass(&fitted))
}

/// The image with its paper black and its ink bright: inverted when the paper is light (the
/// border's median), then stretched so that the paper is 0 and the brightest ink 255.
fn ink_white(grey: Grey) -> Grey {
    let (width, height) = (grey.width, grey.height);
    let mut border: Vec<f32> = (0..width)
        .flat_map(|x| [grey.at(x, 0), grey.at(x, height - 1)])
        .chain((0..height).flat_map(|y| [grey.at(0, y), grey.at(width - 1, y)]))
        .collect();
    border.sort_by(f32::total_cmp);
    let paper = border[border.len() / 2];
    let light_paper = paper > 127.5;
    let ink = |p: f32| if light_paper { 255.0 - p } else { p };
    let paper = ink(paper);
    let brightest = grey.pixels.iter().map(|&p| ink(p)).fold(paper, f32::max);
    let range = (brightest - paper).max(1.0);
    let pixels = grey
        .pixels
        .iter()
        .map(|&p| ((ink(p) - paper) * 255.0 / range).clamp(0.0, 255.0))
        .collect();
    Grey {
        width,
        height,
        pixels,
    }
}

/// The box (left, top, right, bottom; right and bottom past the end) around the ink.
fn ink_box(ink: &Grey) -> Option<(usize, usize, usize, usize)> {
    let mut found: Option<(usize, usize, usize, usize)> = None;
    for y in 0..ink.height {
        for x in 0..ink.width {
            if ink.at(x, y) >= INK {
                let (l, t, r, b) = found.unwrap_or((x, y, x + 1, y + 1));
                found = Some((l.min(x), t.min(y), r.max(x + 1), b.max(y + 1)));
            }
        }
    }
    found
}

/// The box's content scaled so that its longer side is 20 pixels, each output pixel the mean
/// of the area it covers (so thin strokes grey rather than vanish).
fn fit(ink: &Grey, (left, top, w, h): (usize, usize, usize, usize)) -> Grey {
    let scale = BOX as f32 / w.max(h) as f32;
    let (out_w, out_h) = (
        ((w as f32 * scale).round() as usize).clamp(1, BOX),
        ((h as f32 * scale).round() as usize).clamp(1, BOX),
    );
    let (step_x, step_y) = (w as f32 / out_w as f32, h as f32 / out_h as f32);
    let mut pixels = Vec::with_capacity(out_w * out_h);
    for oy in 0..out_h {
        for ox in 0..out_w {
            let (x0, x1) = (ox as f32 * step_x, (ox + 1) as f32 * step_x);
            let (y0, y1) = (oy as f32 * step_y, (oy + 1) as f32 * step_y);
            pixels.push(area_mean(ink, left, top, (x0, x1), (y0, y1)));
        }
    }
    Grey {
        width: out_w,
        height: out_h,
        pixels,
    }
}

/// The mean of `ink` over [x0, x1) × [y0, y1) (in the box's coordinates, from `left`, `top`),
/// each source pixel weighed by how much of it the area covers.
fn area_mean(
    ink: &Grey,
    left: usize,
    top: usize,
    (x0, x1): (f32, f32),
    (y0, y1): (f32, f32),
) -> f32 {
    let overlap = |a0: f32, a1: f32, p: usize| (a1.min(p as f32 + 1.0) - a0.max(p as f32)).max(0.0);
    let (mut sum, mut weight) = (0.0, 0.0);
    for py in y0.floor() as usize..(y1.ceil() as usize) {
        let wy = overlap(y0, y1, py);
        for px in x0.floor() as usize..(x1.ceil() as usize) {
            let w = wy * overlap(x0, x1, px);
            let (x, y) = (left + px, top + py);
            if w > 0.0 && x < ink.width && y < ink.height {
                sum += w * ink.at(x, y);
                weight += w;
            }
        }
    }
    if weight > 0.0 { sum / weight } else { 0.0 }
}

/// `fitted` placed in 28×28 so that its centre of mass falls on the image's centre (14, 14),
/// clipped at the edges as MNIST's shift is.
fn centre_by_mass(fitted: &Grey) -> Vec<u8> {
    let (mut mass, mut sum_x, mut sum_y) = (0.0f64, 0.0f64, 0.0f64);
    for y in 0..fitted.height {
        for x in 0..fitted.width {
            let m = f64::from(fitted.at(x, y));
            mass += m;
            sum_x += m * (x as f64 + 0.5);
            sum_y += m * (y as f64 + 0.5);
        }
    }
    let (cx, cy) = match mass > 0.0 {
        true => (sum_x / mass, sum_y / mass),
        false => (fitted.width as f64 / 2.0, fitted.height as f64 / 2.0),
    };
    let centre = SIDE as f64 / 2.0;
    let (dx, dy) = (
        (centre - cx).round() as isize,
        (centre - cy).round() as isize,
    );
    let mut out = vec![0u8; IMAGE_PIXELS];
    for y in 0..fitted.height {
        for x in 0..fitted.width {
            let (tx, ty) = (x as isize + dx, y as isize + dy);
            if (0..SIDE as isize).contains(&tx) && (0..SIDE as isize).contains(&ty) {
                out[ty as usize * SIDE + tx as usize] = fitted.at(x, y).round() as u8;
            }
        }
    }
    out
}

/// The centre of mass of a 28×28 image, (x, y) in pixels from its top left corner.
pub fn centre_of_mass(image: &[u8]) -> (f64, f64) {
    let (mut mass, mut sx, mut sy) = (0.0, 0.0, 0.0);
    for (i, &p) in image.iter().enumerate() {
        let (x, y) = ((i % SIDE) as f64 + 0.5, (i / SIDE) as f64 + 0.5);
        mass += f64::from(p);
        sx += f64::from(p) * x;
        sy += f64::from(p) * y;
    }
    (sx / mass.max(1.0), sy / mass.max(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 100×80 grey image, paper `paper`, with an "L" of ink `ink` whose corner is at (x, y):
    /// a stroke 30 high and another 20 wide, both 4 thick.
    fn l_shape(paper: u8, ink: u8, (x, y): (usize, usize)) -> Vec<u8> {
        let (w, h) = (100, 80);
        let mut grey = vec![paper; w * h];
        for yy in y - 30..y {
            for xx in x..x + 4 {
                grey[yy * w + xx] = ink;
            }
        }
        for yy in y - 4..y {
            for xx in x..x + 20 {
                grey[yy * w + xx] = ink;
            }
        }
        grey
    }

    #[test]
    fn a_digit_drawn_off_centre_lands_centred_by_mass_in_a_20_pixel_box() {
        let image = from_grey_bytes(&l_shape(0, 255, (5, 75)), 100, 80).unwrap();
        let (cx, cy) = centre_of_mass(&image);
        assert!(
            (cx - 14.0).abs() <= 0.5 && (cy - 14.0).abs() <= 0.5,
            "({cx}, {cy})"
        );
        // The longer side (30 pixels high) is 20 now: ink spans 20 rows.
        let rows: Vec<usize> = (0..SIDE)
            .filter(|&y| (0..SIDE).any(|x| image[y * SIDE + x] >= 128))
            .collect();
        assert_eq!(rows.len(), 20, "{rows:?}");
        // The same L anywhere else in the image gives the same digit.
        let elsewhere = from_grey_bytes(&l_shape(0, 255, (60, 40)), 100, 80).unwrap();
        assert_eq!(image, elsewhere);
    }

    #[test]
    fn dark_ink_on_light_paper_is_inverted_back() {
        let light = from_grey_bytes(&l_shape(230, 20, (30, 60)), 100, 80).unwrap();
        let dark = from_grey_bytes(&l_shape(0, 255, (30, 60)), 100, 80).unwrap();
        assert_eq!(light, dark);
        assert_eq!(light[0], 0, "the paper is black");
        assert_eq!(*light.iter().max().unwrap(), 255, "the ink is white");
    }

    #[test]
    fn rgba_and_transparency_read_as_ink_on_paper() {
        let grey = l_shape(255, 0, (30, 60));
        // Black ink on a transparent canvas: the paper reads as white.
        let rgba: Vec<u8> = grey
            .iter()
            .flat_map(|&g| if g == 0 { [0, 0, 0, 255] } else { [0, 0, 0, 0] })
            .collect();
        let from_rgba = from_rgba(&rgba, 100, 80).unwrap();
        assert_eq!(from_rgba, from_grey_bytes(&grey, 100, 80).unwrap());
    }

    #[test]
    fn what_is_not_a_digit_is_refused_with_its_reason() {
        assert_eq!(from_grey_bytes(&[200; 100], 10, 10), Err(FormError::Blank));
        let mut square = vec![255u8; 100 * 100];
        for y in 10..90 {
            for x in 10..90 {
                square[y * 100 + x] = 0;
            }
        }
        let refused = from_grey_bytes(&square, 100, 100).unwrap_err();
        assert!(matches!(refused, FormError::NotADigit(_)), "{refused}");
        assert_eq!(
            from_rgba(&[0; 12], 2, 2),
            Err(FormError::Bytes {
                found: 12,
                expected: 16,
                width: 2,
                height: 2
            })
        );
        assert_eq!(from_grey_bytes(&[], 0, 5), Err(FormError::Size(0, 5)));
        // A one: a thin vertical stroke fills its own box, and is a digit.
        let mut one = vec![0u8; 50 * 50];
        for y in 5..45 {
            for x in 24..27 {
                one[y * 50 + x] = 255;
            }
        }
        assert!(from_grey_bytes(&one, 50, 50).is_ok());
    }
}
