//! The runs table: a row a run, sortable by any column, and a column of only the settings in
//! which the runs shown differ. The page draws it as HTML, `webtrain compare` as text.

use std::cmp::Ordering;

use crate::config::settings::{SETTINGS, Setting};
use crate::runs::RunRecord;

/// A column of the runs table, beside the differing settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    Name,
    Started,
    Engine,
    Best,
    Final,
    Time,
    SamplesPerSec,
    End,
}

impl Column {
    pub const ALL: [Column; 8] = [
        Column::Name,
        Column::Started,
        Column::Engine,
        Column::Best,
        Column::Final,
        Column::Time,
        Column::SamplesPerSec,
        Column::End,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Column::Name => "run",
            Column::Started => "started",
            Column::Engine => "engine",
            Column::Best => "best test %",
            Column::Final => "final test %",
            Column::Time => "time",
            Column::SamplesPerSec => "samples/s",
            Column::End => "end",
        }
    }

    /// The name a sort is asked by (`?sort=best`, the page's header buttons).
    pub fn key(self) -> &'static str {
        match self {
            Column::Name => "name",
            Column::Started => "started",
            Column::Engine => "engine",
            Column::Best => "best",
            Column::Final => "final",
            Column::Time => "time",
            Column::SamplesPerSec => "speed",
            Column::End => "end",
        }
    }

    pub fn from_key(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|column| column.key() == key)
    }

    /// `run`'s cell, as text. `started` is how the caller writes a time (the page in the
    /// browser's own zone, the CLI in UTC).
    pub fn cell(self, run: &RunRecord, started: &dyn Fn(f64) -> String) -> String {
        let percent = |value: Option<f64>| value.map_or("—".into(), |v| format!("{v:.2}"));
        match self {
            Column::Name => run.name.clone(),
            Column::Started => match run.metrics.started_ms > 0.0 {
                true => started(run.metrics.started_ms),
                false => "—".into(),
            },
            Column::Engine => run.engine.to_string(),
            Column::Best => match run.best() {
                Some((epoch, accuracy)) => format!("{accuracy:.2} (epoch {epoch})"),
                None => "—".into(),
            },
            Column::Final => percent(run.final_accuracy()),
            Column::Time => duration(run.metrics.training_secs),
            Column::SamplesPerSec => format!("{:.0}", run.metrics.samples_per_sec),
            Column::End => run.end().to_string(),
        }
    }

    /// Orders two runs by this column, ascending; a run without a value goes after one with.
    fn compare(self, a: &RunRecord, b: &RunRecord) -> Ordering {
        let number = |value: &dyn Fn(&RunRecord) -> Option<f64>| match (value(a), value(b)) {
            (Some(x), Some(y)) => x.total_cmp(&y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        };
        match self {
            Column::Name => a.name.cmp(&b.name),
            Column::Started => a.metrics.started_ms.total_cmp(&b.metrics.started_ms),
            Column::Engine => a.engine.cmp(&b.engine),
            Column::Best => number(&|run| run.best().map(|(_, accuracy)| accuracy)),
            Column::Final => number(&|run| run.final_accuracy()),
            Column::Time => a.metrics.training_secs.total_cmp(&b.metrics.training_secs),
            Column::SamplesPerSec => a
                .metrics
                .samples_per_sec
                .total_cmp(&b.metrics.samples_per_sec),
            Column::End => a.end().cmp(&b.end()),
        }
    }
}

/// A training time as people read it: `4.2 s`, `42 s`, `3 min 05 s`, `1 h 02 min`.
pub fn duration(secs: f64) -> String {
    let whole = secs.max(0.0).round() as u64;
    match whole {
        _ if secs < 9.95 => format!("{:.1} s", secs.max(0.0)),
        0..60 => format!("{whole} s"),
        60..3600 => format!("{} min {:02} s", whole / 60, whole % 60),
        _ => format!("{} h {:02} min", whole / 3600, whole / 60 % 60),
    }
}

/// Sorts `runs` by `column`; runs without a value stay last either way, and equals keep their
/// order.
pub fn sort(runs: &mut [&RunRecord], column: Column, descending: bool) {
    runs.sort_by(|a, b| {
        let ascending = column.compare(a, b);
        let has = |run: &RunRecord| match column {
            Column::Best => run.best().is_some(),
            Column::Final => run.final_accuracy().is_some(),
            _ => true,
        };
        match (descending, has(a), has(b)) {
            (true, true, true) => ascending.reverse(),
            _ => ascending,
        }
    });
}

/// The settings whose values differ among `runs`, in the settings table's order.
pub fn differing_settings(runs: &[&RunRecord]) -> Vec<&'static Setting> {
    SETTINGS
        .iter()
        .filter(|setting| {
            let mut values = runs.iter().map(|run| setting.text(&run.metrics.config));
            values
                .next()
                .is_some_and(|first| values.any(|value| value != first))
        })
        .collect()
}

/// `run`'s values of `settings`, as `lr 0.1, seed 2`.
pub fn settings_text(run: &RunRecord, settings: &[&Setting]) -> String {
    settings
        .iter()
        .map(|setting| {
            let value = setting.text(&run.metrics.config);
            let value = if value.is_empty() { "all" } else { &value };
            format!("{} {value}", setting.name)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Groups of two or more of `runs` whose settings are the same but for the seed: the runs a
/// chart can show as their mean. Each group lists indices into `runs`, in their order.
pub fn seed_groups(runs: &[&RunRecord]) -> Vec<Vec<usize>> {
    let without_seed = |run: &RunRecord| -> Vec<String> {
        SETTINGS
            .iter()
            .filter(|setting| setting.name != "seed")
            .map(|setting| setting.text(&run.metrics.config))
            .collect()
    };
    let mut groups: Vec<(Vec<String>, Vec<usize>)> = Vec::new();
    for (index, run) in runs.iter().enumerate() {
        let key = without_seed(run);
        match groups.iter_mut().find(|(other, _)| *other == key) {
            Some((_, members)) => members.push(index),
            None => groups.push((key, vec![index])),
        }
    }
    groups
        .into_iter()
        .map(|(_, members)| members)
        .filter(|members| members.len() > 1)
        .collect()
}

/// The table as aligned text, for a terminal: the columns, then the differing settings.
pub fn render_text(runs: &[&RunRecord], started: &dyn Fn(f64) -> String) -> String {
    let differing = differing_settings(runs);
    let mut header: Vec<String> = Column::ALL.iter().map(|c| c.title().to_string()).collect();
    header.push("differs in".into());
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|run| {
            let mut cells: Vec<String> = Column::ALL.iter().map(|c| c.cell(run, started)).collect();
            cells.push(settings_text(run, &differing));
            cells
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            let cells = std::iter::once(&header).chain(&rows);
            cells.map(|row| row[i].chars().count()).max().unwrap_or(0)
        })
        .collect();
    let line = |row: &Vec<String>| {
        let cells = row.iter().zip(&widths);
        let padded: Vec<String> = cells.map(|(cell, &w)| format!("{cell:<w$}")).collect();
        padded.join("  ").trim_end().to_string()
    };
    std::iter::once(&header)
        .chain(&rows)
        .map(line)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TrainConfig;
    use crate::runs::tests::run;

    fn config(lr: f64, seed: u64) -> TrainConfig {
        TrainConfig {
            lr,
            seed,
            ..TrainConfig::default()
        }
    }

    #[test]
    fn the_differing_column_names_only_the_settings_that_differ() {
        let a = run("a", config(0.01, 1), 2.0, &[98.0]);
        let b = run("b", config(0.1, 1), 2.0, &[97.0]);
        let names = |runs: &[&RunRecord]| -> Vec<&str> {
            differing_settings(runs).iter().map(|s| s.name).collect()
        };
        assert_eq!(names(&[&a, &b]), ["lr"]);
        assert_eq!(settings_text(&b, &differing_settings(&[&a, &b])), "lr 0.1");
        let c = run("c", config(0.1, 7), 2.0, &[97.0]);
        assert_eq!(names(&[&a, &b, &c]), ["lr", "seed"]);
        assert!(names(&[&a]).is_empty(), "one run differs in nothing");
        let limited = TrainConfig {
            train_limit: Some(2000),
            ..config(0.01, 1)
        };
        let d = run("d", limited, 2.0, &[90.0]);
        let differing = differing_settings(&[&a, &d]);
        assert_eq!(settings_text(&a, &differing), "train_limit all");
        assert_eq!(settings_text(&d, &differing), "train_limit 2000");
    }

    #[test]
    fn sorts_by_any_column_with_runs_lacking_a_value_last() {
        let a = run("a", config(0.01, 1), 2.0, &[97.0, 98.5]);
        let b = run("b", config(0.1, 1), 2.0, &[99.0]);
        let c = run("c", config(0.2, 1), 2.0, &[]);
        let names = |runs: &[&RunRecord]| runs.iter().map(|r| r.name.clone()).collect::<String>();
        let mut runs = vec![&c, &a, &b];
        sort(&mut runs, Column::Best, true);
        assert_eq!(names(&runs), "bac");
        sort(&mut runs, Column::Best, false);
        assert_eq!(names(&runs), "abc");
        sort(&mut runs, Column::Name, true);
        assert_eq!(names(&runs), "cba");
        sort(&mut runs, Column::Time, false);
        assert_eq!(names(&runs), "cba", "by training time: 0, 10 and 20 s");
        assert_eq!(Column::from_key("speed"), Some(Column::SamplesPerSec));
        assert_eq!(Column::from_key("nope"), None);
    }

    #[test]
    fn cells_say_the_best_epoch_the_time_and_the_end() {
        let a = run("a", config(0.01, 1), 2.0, &[97.0, 98.5, 98.25]);
        let utc = |ms: f64| format!("{ms}");
        assert_eq!(Column::Best.cell(&a, &utc), "98.50 (epoch 2)");
        assert_eq!(Column::Final.cell(&a, &utc), "98.25");
        assert_eq!(Column::Time.cell(&a, &utc), "30 s");
        assert_eq!(Column::End.cell(&a, &utc), "finished");
        assert_eq!(duration(185.0), "3 min 05 s");
        assert_eq!(duration(0.44), "0.4 s");
        assert_eq!(duration(3725.0), "1 h 02 min");
    }

    #[test]
    fn runs_that_differ_only_by_seed_form_a_group() {
        let a = run("a", config(0.01, 1), 2.0, &[98.0]);
        let b = run("b", config(0.01, 2), 2.0, &[98.2]);
        let c = run("c", config(0.1, 3), 2.0, &[97.0]);
        let d = run("d", config(0.01, 4), 2.0, &[98.1]);
        assert_eq!(seed_groups(&[&a, &b, &c, &d]), vec![vec![0, 1, 3]]);
        assert!(seed_groups(&[&a, &c]).is_empty());
    }

    #[test]
    fn the_text_table_has_a_line_a_run_and_the_differing_settings() {
        let a = run("first", config(0.01, 1), 2.0, &[98.0]);
        let b = run("second", config(0.1, 1), 2.0, &[97.0]);
        let text = render_text(&[&a, &b], &|_| "2026-12-05 10:00".into());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("run ") && lines[0].ends_with("differs in"));
        assert!(lines[1].starts_with("first ") && lines[1].ends_with("lr 0.01"));
        assert!(lines[2].contains("97.00 (epoch 1)") && lines[2].ends_with("lr 0.1"));
    }
}
