//! The runs table as HTML: a row a run with its tick, its cells (the settings in which the runs
//! differ beside its name) and its actions, under a header of sort buttons.

use std::collections::BTreeSet;

use wasm_bindgen::JsValue;

use crate::config::settings::Setting;
use crate::runs::table::{Column, differing_settings, settings_text};
use crate::runs::{Engine, RunRecord};

/// `text` as HTML text or an attribute's value: a run's name is the user's.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A button of the table: `text` shown, `label` its accessible name (which holds `text`).
fn button(action: &str, text: &str, label: &str) -> String {
    format!(
        r#"<button type="button" data-action="{action}" aria-label="{}">{}</button>"#,
        escape(label),
        escape(text)
    )
}

/// The table's columns in their order: the differing settings (`None`) beside the run's name,
/// what tells the runs compared apart.
fn columns() -> Vec<Option<Column>> {
    let mut columns: Vec<Option<Column>> = Column::ALL.into_iter().map(Some).collect();
    columns.insert(1, None);
    columns
}

fn checked(on: bool) -> &'static str {
    if on { " checked" } else { "" }
}

/// The header row: a tick for every run, and a sort button a column.
fn header_html(sort: Column, descending: bool, all_selected: bool) -> String {
    let mut html = format!(
        r#"<tr><th>show <input type="checkbox" data-action="select-all" aria-label="Show every run on the charts"{}></th>"#,
        checked(all_selected)
    );
    for column in columns() {
        let Some(column) = column else {
            html.push_str("<th>differs in</th>");
            continue;
        };
        let order = match (column == sort).then_some(descending) {
            Some(true) => "descending",
            Some(false) => "ascending",
            None => "none",
        };
        let title = column.title();
        let sort = button(
            &format!("sort-{}", column.key()),
            title,
            &format!("Sort by {title}"),
        );
        html.push_str(&format!(r#"<th aria-sort="{order}">{sort}</th>"#));
    }
    html.push_str("<th>actions</th></tr>");
    html
}

/// A start time as this browser writes dates and times. One formatter serves every row:
/// making one is most of what formatting a date costs.
fn date_formatter() -> impl Fn(f64) -> String {
    let options = js_sys::Object::new();
    for (key, value) in [("dateStyle", "short"), ("timeStyle", "short")] {
        let _ = js_sys::Reflect::set(&options, &key.into(), &value.into());
    }
    let format = js_sys::Intl::DateTimeFormat::new(&js_sys::Array::new(), &options).format();
    move |ms: f64| {
        format
            .call1(&JsValue::NULL, &js_sys::Date::new(&ms.into()))
            .ok()
            .and_then(|text| text.as_string())
            .unwrap_or_default()
    }
}

/// A run's row: its tick, its cells, and what can be done with it.
fn row_html(
    run: &RunRecord,
    selected: bool,
    differing: &[&Setting],
    started: &dyn Fn(f64) -> String,
) -> String {
    let name = &run.name;
    let mut html = format!(
        r#"<tr data-id="{}"><td><input type="checkbox" data-action="select" aria-label="Show {} on the charts"{}></td>"#,
        escape(&run.id),
        escape(name),
        checked(selected)
    );
    for column in columns() {
        let (key, text) = match column {
            Some(column) => (column.key(), column.cell(run, started)),
            None => ("differs", settings_text(run, differing)),
        };
        // The engine's cell says, on hover, what trained: the run's backend line.
        let title = match column {
            Some(Column::Engine) => format!(r#" title="{}""#, escape(&run.metrics.backend)),
            _ => String::new(),
        };
        let text = escape(&text);
        html.push_str(&format!(r#"<td data-column="{key}"{title}>{text}</td>"#));
    }
    html.push_str(r#"<td class="actions">"#);
    html.push_str(&button(
        "load",
        "Load settings",
        &format!("Load settings of {name}"),
    ));
    html.push_str(&button("export", "Export", &format!("Export {name}")));
    // A native run's folder is its record: the page neither renames nor deletes it.
    if run.engine == Engine::Browser {
        html.push_str(&button("rename", "Rename", &format!("Rename {name}")));
        html.push_str(&button("delete", "Delete", &format!("Delete {name}")));
    }
    html.push_str("</td></tr>");
    html
}

/// The runs table as HTML, built as one string to set at once: a hundred runs' rows are one
/// DOM call, not thousands. `runs` in their order; `sort` and `descending` say which.
pub(super) fn table_html(
    runs: &[&RunRecord],
    selected: &BTreeSet<String>,
    (sort, descending): (Column, bool),
) -> String {
    if runs.is_empty() {
        return String::new();
    }
    let ticked: Vec<&RunRecord> = runs
        .iter()
        .copied()
        .filter(|run| selected.contains(&run.id))
        .collect();
    // The settings that differ among the runs compared, or among all when none is selected.
    let differing = differing_settings(match ticked.len() > 1 {
        true => &ticked,
        false => runs,
    });
    let mut html = header_html(sort, descending, ticked.len() == runs.len());
    let started = date_formatter();
    for run in runs {
        let on = selected.contains(&run.id);
        html.push_str(&row_html(run, on, &differing, &started));
    }
    html
}
