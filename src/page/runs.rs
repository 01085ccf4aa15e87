//! The runs kept, in a table under the run: this browser's (IndexedDB) and, opened from
//! `webtrain ui`, the native engine's run folders. Runs selected in the table are drawn on the
//! charts, the live one over them; smoothing, a logarithmic loss axis and the x axis are the
//! viewer's. A run can be renamed, deleted, exported, imported, and its settings loaded.

use std::cell::RefCell;
use std::collections::BTreeSet;

use wasm_bindgen::{JsCast, JsValue};
use web_sys::{Element, HtmlElement, HtmlInputElement};

use super::dom::{self, by_id, set_text};
use super::form::{backend_choice, fill_form, validate_form, write_query};
use super::{PageError, Shared, download, run, run_store, show_error};
use crate::runs::chart::ChartOptions;
use crate::runs::export::{self, MAX_RUN_BYTES};
use crate::runs::table::{Column, differing_settings, settings_text, sort};
use crate::runs::{Engine, RunRecord};
use crate::session::protocol::ListRuns;

/// What the table shows and the charts overlay.
struct Kept {
    runs: Vec<RunRecord>,
    /// The ids of the runs drawn on the charts.
    selected: BTreeSet<String>,
    sort: Column,
    descending: bool,
    options: ChartOptions,
    mean_seeds: bool,
}

thread_local! {
    static KEPT: RefCell<Kept> = RefCell::new(Kept {
        runs: Vec::new(),
        selected: BTreeSet::new(),
        sort: Column::Started,
        descending: true,
        options: ChartOptions::default(),
        mean_seeds: false,
    });
}

/// The runs selected for the charts, in the table's order, with how to draw them; none when
/// none is selected.
pub fn overlay() -> Option<(Vec<RunRecord>, ChartOptions, bool)> {
    KEPT.with(|kept| {
        let kept = kept.borrow();
        let mut shown: Vec<&RunRecord> = kept.runs.iter().collect();
        sort(&mut shown, kept.sort, kept.descending);
        let selected: Vec<RunRecord> = shown
            .into_iter()
            .filter(|run| kept.selected.contains(&run.id))
            .cloned()
            .collect();
        (!selected.is_empty()).then_some((selected, kept.options, kept.mean_seeds))
    })
}

/// Puts `run` in the table, in place of the run with its id if there is one.
pub fn show(run: RunRecord) {
    KEPT.with(|kept| {
        let runs = &mut kept.borrow_mut().runs;
        match runs.iter_mut().find(|kept| kept.id == run.id) {
            Some(kept) => *kept = run,
            None => runs.push(run),
        }
    });
    render();
}

/// The runs this browser keeps and, from `webtrain ui`, the native engine's.
pub async fn load(page: &Shared) -> Result<(), PageError> {
    let (mut runs, unreadable) = run_store::all().await?;
    if unreadable > 0 {
        set_text(
            "runs-status",
            &format!("{unreadable} kept runs could not be read and are left out"),
        );
    }
    let native = page.borrow().engines.native.clone();
    if let Some(native) = native {
        runs.extend(native.ask(ListRuns {}).await?);
    }
    KEPT.with(|kept| kept.borrow_mut().runs = runs);
    render();
    Ok(())
}

/// The native engine's runs again, after one of its runs ended.
pub async fn reload_native(page: &Shared) -> Result<(), PageError> {
    let native = page.borrow().engines.native.clone();
    let Some(native) = native else {
        return Ok(());
    };
    let runs = native.ask(ListRuns {}).await?;
    KEPT.with(|kept| {
        let kept = &mut kept.borrow_mut().runs;
        kept.retain(|run| run.engine != Engine::Native);
        kept.extend(runs);
    });
    render();
    Ok(())
}

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

/// The table, drawn anew from the kept runs.
fn render() {
    if let Err(error) = KEPT.with(|kept| draw_table(&kept.borrow())) {
        show_error(&error.to_string());
    }
}

/// The table as HTML, built as one string and set at once: a hundred runs' rows are one DOM
/// call, not thousands.
fn draw_table(kept: &Kept) -> Result<(), PageError> {
    let table = by_id::<Element>("runs-table");
    by_id::<HtmlElement>("runs-empty").set_hidden(!kept.runs.is_empty());
    let mut shown: Vec<&RunRecord> = kept.runs.iter().collect();
    sort(&mut shown, kept.sort, kept.descending);
    let selected: Vec<&RunRecord> = shown
        .iter()
        .copied()
        .filter(|run| kept.selected.contains(&run.id))
        .collect();
    // The settings that differ among the runs compared, or among all when none is selected.
    let differing = differing_settings(match selected.len() > 1 {
        true => &selected,
        false => &shown,
    });
    let checked = |on: bool| if on { " checked" } else { "" };
    let all = !kept.runs.is_empty() && selected.len() == kept.runs.len();
    let mut html = format!(
        r#"<tr><th>show <input type="checkbox" data-action="select-all" aria-label="Show every run on the charts"{}></th>"#,
        checked(all)
    );
    // The settings that differ beside the run's name: what tells the runs compared apart.
    let columns: Vec<Option<Column>> = Column::ALL
        .iter()
        .enumerate()
        .flat_map(|(i, &column)| match i {
            0 => vec![Some(column), None],
            _ => vec![Some(column)],
        })
        .collect();
    for &column in &columns {
        let Some(column) = column else {
            html.push_str("<th>differs in</th>");
            continue;
        };
        let order = match (column == kept.sort).then_some(kept.descending) {
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
    // One formatter for every row: making one is most of what formatting a date costs.
    let options = js_sys::Object::new();
    for (key, value) in [("dateStyle", "short"), ("timeStyle", "short")] {
        let _ = js_sys::Reflect::set(&options, &key.into(), &value.into());
    }
    let format = js_sys::Intl::DateTimeFormat::new(&js_sys::Array::new(), &options).format();
    let started = |ms: f64| {
        format
            .call1(&JsValue::NULL, &js_sys::Date::new(&ms.into()))
            .ok()
            .and_then(|text| text.as_string())
            .unwrap_or_default()
    };
    for run in shown {
        let name = &run.name;
        html.push_str(&format!(
            r#"<tr data-id="{}"><td><input type="checkbox" data-action="select" aria-label="Show {} on the charts"{}></td>"#,
            escape(&run.id),
            escape(name),
            checked(kept.selected.contains(&run.id))
        ));
        for column in &columns {
            let (key, text) = match column {
                Some(column) => (column.key(), column.cell(run, &started)),
                None => ("differs", settings_text(run, &differing)),
            };
            // The engine's cell says, on hover, what trained: the run's backend line.
            let title = match column {
                Some(Column::Engine) => format!(r#" title="{}""#, escape(&run.metrics.backend)),
                _ => String::new(),
            };
            html.push_str(&format!(
                r#"<td data-column="{key}"{title}>{}</td>"#,
                escape(&text)
            ));
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
    }
    if kept.runs.is_empty() {
        html.clear();
    }
    table.set_inner_html(&html);
    Ok(())
}

/// The kept run with `id`.
fn find(id: &str) -> Option<RunRecord> {
    KEPT.with(|kept| kept.borrow().runs.iter().find(|run| run.id == id).cloned())
}

/// What a click on the table asks, by the `data-action` of what was clicked and the `data-id`
/// of its row.
async fn act(action: String, id: Option<String>) -> Result<(), PageError> {
    if let Some(key) = action.strip_prefix("sort-") {
        if let Some(column) = Column::from_key(key) {
            KEPT.with(|kept| {
                let mut kept = kept.borrow_mut();
                kept.descending = match kept.sort == column {
                    true => !kept.descending,
                    false => !matches!(column, Column::Name | Column::Engine),
                };
                kept.sort = column;
            });
            render();
            run::redraw();
        }
        return Ok(());
    }
    if action == "select-all" {
        KEPT.with(|kept| {
            let mut kept = kept.borrow_mut();
            kept.selected = match kept.runs.iter().all(|run| kept.selected.contains(&run.id)) {
                true => BTreeSet::new(),
                false => kept.runs.iter().map(|run| run.id.clone()).collect(),
            };
        });
        render();
        run::redraw();
        return Ok(());
    }
    let Some(run) = id.as_deref().and_then(find) else {
        return Ok(());
    };
    match action.as_str() {
        "select" => {
            KEPT.with(|kept| {
                let selected = &mut kept.borrow_mut().selected;
                if !selected.remove(&run.id) {
                    selected.insert(run.id.clone());
                }
            });
            render();
            run::redraw();
        }
        "load" => {
            fill_form(&run.metrics.config);
            let config = validate_form()?;
            write_query(&config, backend_choice()?);
            set_text(
                "runs-status",
                &format!("The settings of {} are in the form", run.name),
            );
        }
        "rename" => {
            let window = web_sys::window().expect("a window");
            let asked = window
                .prompt_with_message_and_default("Name this run", &run.name)
                .map_err(dom::failed)?;
            let Some(name) = asked
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
            else {
                return Ok(());
            };
            let renamed = RunRecord {
                name: name.chars().take(200).collect(),
                ..run
            };
            run_store::put(&renamed, None).await?;
            show(renamed);
            run::redraw();
        }
        "delete" => {
            run_store::delete(&run.id).await?;
            KEPT.with(|kept| {
                let mut kept = kept.borrow_mut();
                kept.runs.retain(|kept| kept.id != run.id);
                kept.selected.remove(&run.id);
            });
            render();
            run::redraw();
            set_text("runs-status", &format!("Deleted {}", run.name));
        }
        "export" => {
            let weights = match run.engine {
                Engine::Browser => run_store::weights(&run.id).await?,
                Engine::Native => None,
            };
            let json = export::to_json(&run, weights.as_deref());
            let slug: String = run
                .name
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect();
            let name = format!("webtrain-run-{slug}.json");
            download::save_file(json.as_bytes(), &name, "application/json")?;
            set_text("runs-status", &format!("Exported {} as {name}", run.name));
        }
        _ => {}
    }
    Ok(())
}

/// A run file the user chose, kept in this browser; an id already taken gets a new one.
async fn import() -> Result<(), PageError> {
    let Some(file) = by_id::<HtmlInputElement>("import-run")
        .files()
        .and_then(|files| files.get(0))
    else {
        return Ok(());
    };
    let name = file.name();
    let bytes = download::read_file(&name, file, MAX_RUN_BYTES).await?;
    let (mut run, weights) = export::from_json(&bytes).map_err(|error| PageError::Read {
        file: name.clone(),
        message: error.to_string(),
    })?;
    let taken = |id: &str| find(id).is_some();
    if taken(&run.id) {
        let base = run.id.clone();
        run.id = (2..)
            .map(|n| format!("{base}-{n}"))
            .find(|id| !taken(id))
            .expect("an id is free");
    }
    // Kept here, it is this browser's to rename and delete.
    run.engine = Engine::Browser;
    run_store::put(&run, weights.as_deref()).await?;
    set_text("runs-status", &format!("Imported {} from {name}", run.name));
    show(run);
    Ok(())
}

/// The chart controls' values into the overlay's options.
fn read_options() {
    let smoothing = dom::value("smoothing").parse().unwrap_or(0.0);
    set_text("smoothing-value", &format!("{smoothing:.2}"));
    KEPT.with(|kept| {
        let mut kept = kept.borrow_mut();
        kept.options = ChartOptions {
            smoothing,
            log_loss: by_id::<HtmlInputElement>("log-loss").checked(),
            x_axis: match dom::value("x-axis").as_str() {
                "step" => crate::runs::chart::XAxis::Step,
                "time" => crate::runs::chart::XAxis::Time,
                _ => crate::runs::chart::XAxis::Epoch,
            },
        };
        kept.mean_seeds = by_id::<HtmlInputElement>("mean-seeds").checked();
    });
}

pub fn wire() {
    dom::on("runs-table", "click", move |event| {
        let target = event.target().and_then(|t| t.dyn_into::<Element>().ok());
        let Some(action) = target.as_ref().and_then(|t| t.get_attribute("data-action")) else {
            return;
        };
        let id = target
            .and_then(|t| t.closest("tr").ok().flatten())
            .and_then(|row| row.get_attribute("data-id"));
        wasm_bindgen_futures::spawn_local(async move {
            if let Err(error) = act(action, id).await {
                show_error(&error.to_string());
            }
        });
    });
    for (id, event) in [
        ("smoothing", "input"),
        ("log-loss", "change"),
        ("x-axis", "change"),
        ("mean-seeds", "change"),
    ] {
        dom::on(id, event, |_| {
            read_options();
            run::redraw();
        });
    }
    dom::on("import-run", "change", |_| {
        wasm_bindgen_futures::spawn_local(async {
            if let Err(error) = import().await {
                show_error(&error.to_string());
            }
            dom::set_value("import-run", "");
        });
    });
    read_options();
}
