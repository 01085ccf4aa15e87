//! A run's pace while its page was in the background, against its pace before: what the page
//! says when the tab comes back (`page/background.rs`), kept apart from the DOM so that it is
//! tested natively.

/// A shorter spell in the background says nothing of the pace.
const SPELL_MIN_MS: f64 = 3_000.0;
/// The share of its pace a run may lose unremarked.
const KEPT: f64 = 0.9;

/// Steps a second over `recent` ((time in ms, step), oldest first), if it spans a second or
/// more.
pub fn steps_per_s(recent: impl IntoIterator<Item = (f64, usize)>) -> Option<f64> {
    let mut recent = recent.into_iter();
    let (t0, s0) = recent.next()?;
    let (t1, s1) = recent.last()?;
    (t1 - t0 >= 1000.0).then(|| s1.saturating_sub(s0) as f64 / ((t1 - t0) / 1000.0))
}

/// What the log says of a spell of `hidden_ms` in the background in which the run went at
/// `hidden` steps a second against `before`: nothing unless it lost more than a tenth.
pub fn slowed_while_hidden(before: f64, hidden: f64, hidden_ms: f64) -> Option<String> {
    if hidden_ms < SPELL_MIN_MS || before <= 0.0 || hidden >= KEPT * before {
        return None;
    }
    let share = (100.0 * hidden / before).round();
    let seconds = (hidden_ms / 1000.0).round();
    Some(format!(
        "While this tab was in the background ({seconds} s), the run went at {share} % of its \
         pace: the browser slowed it. A tab in front, or in a window of its own, trains at full \
         speed."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_kept_nine_tenths_of_its_pace_is_not_remarked() {
        assert_eq!(slowed_while_hidden(10.0, 9.0, 60_000.0), None);
        assert_eq!(slowed_while_hidden(10.0, 12.0, 60_000.0), None);
        // Too short a spell to say anything of.
        assert_eq!(slowed_while_hidden(10.0, 1.0, 2_000.0), None);
    }

    #[test]
    fn a_slowed_run_says_how_much_and_for_how_long() {
        let said = slowed_while_hidden(10.0, 2.5, 61_400.0).unwrap();
        assert!(said.contains("(61 s)") && said.contains("25 %"), "{said}");
        let frozen = slowed_while_hidden(10.0, 0.0, 10_000.0).unwrap();
        assert!(frozen.contains(" 0 %"), "{frozen}");
    }

    #[test]
    fn the_pace_needs_a_second_of_steps() {
        assert_eq!(steps_per_s([(0.0, 10), (500.0, 15)]), None);
        assert_eq!(
            steps_per_s([(0.0, 10), (1_000.0, 14), (2_000.0, 30)]),
            Some(10.0)
        );
        assert_eq!(steps_per_s([(0.0, 10)]), None);
    }
}
