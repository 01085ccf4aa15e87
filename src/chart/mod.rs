//! Every chart webtrain draws, with plotters on any backend (SVG natively, a canvas in the
//! page): one run's loss and accuracy (`run`, an overlay of one), runs overlaid (`overlay`),
//! the learning-rate range test (`lr_find`) and the schedule's preview (`schedule`), all in
//! `style`'s colours, mesh and legend.

pub mod digit_map;
pub mod inside;
pub mod learning;
pub mod lr_find;
pub mod overlay;
pub mod run;
pub mod schedule;
pub mod series;
pub mod style;
