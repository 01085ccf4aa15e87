//! A gallery of test digits with the current model's guess and the true label, mistakes
//! marked, each mistake one click from one's own digits.

use web_sys::Element;

use super::digit::{digit_figure, element};
use super::dom::{self, by_id};
use super::error::PageError;
use super::state::Shared;
use super::{collection, inside};
use crate::session::protocol::Gallery;

/// The current model's guesses on test digits: the first ones and some of its mistakes.
pub async fn show(page: &Shared) -> Result<(), PageError> {
    if page.borrow().model.is_none() {
        return Ok(());
    }
    let trainer = page.borrow().trainer.clone();
    let digits = trainer.ask(Gallery {}).await?;
    let gallery = by_id::<Element>("gallery");
    gallery.set_text_content(None);
    for digit in digits {
        let (index, truth, guess) = (digit.index, digit.truth, digit.guess);
        let right = usize::from(truth) == guess;
        let caption = match right {
            true => format!("{guess}"),
            false => format!("{guess}, is {truth}"),
        };
        let title = format!("test image {index}: true {truth}, predicted {guess}");
        let pixels = digit.pixels.bytes().to_vec();
        let figure = digit_figure(&pixels, &caption, &title);
        inside::make_lookable(page, &figure, pixels.clone(), format!("test image {index}"));
        figure.set_class_name(if right { "right" } else { "mistake" });
        if !right {
            // A mistake can be taught: added to one's own digits with its true label.
            let add = element("button", &format!("Add as {truth}"));
            let _ = add.set_attribute("type", "button");
            let _ = add.set_attribute("class", "add-mistake");
            dom::on_element(&add, "click", move |_| collection::add(truth, &pixels));
            let _ = figure.append_child(&add);
        }
        let _ = gallery.append_child(&figure);
    }
    Ok(())
}
