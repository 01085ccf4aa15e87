//! The runs kept, in a table under the run: this browser's (IndexedDB) and, opened from
//! `webtrain ui`, the native engine's run folders. Runs selected in the table are drawn on the
//! charts, the live one over them; smoothing, a logarithmic loss axis and the x axis are the
//! viewer's. A run can be renamed, deleted, exported, imported, and its settings loaded.

use std::cell::RefCell;
use std::collections::BTreeSet;

use wasm_bindgen::JsCast;
use web_sys::{Element, HtmlElement, HtmlInputElement};

use super::charts::{self, Overlay};
use super::dom::{self, by_id, set_text};
use super::error::PageError;
use super::form::{backend_choice, fill_form, form_config, validate_form, write_query};
use super::runs_table::table_html;
use super::state::{Shared, show_error};
use super::{digit_map, download, learning, run_store};
use crate::chart::overlay::ChartOptions;
use crate::runs::export::{self, MAX_RUN_BYTES};
use crate::runs::table::{Column, sort};
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
fn overlay() -> Option<Overlay> {
    KEPT.with(|kept| {
        let kept = kept.borrow();
        let mut shown: Vec<&RunRecord> = kept.runs.iter().collect();
        sort(&mut shown, kept.sort, kept.descending);
        let selected: Vec<RunRecord> = shown
            .into_iter()
            .filter(|run| kept.selected.contains(&run.id))
            .cloned()
            .collect();
        (!selected.is_empty()).then_some(Overlay {
            runs: selected,
            options: kept.options,
            mean_seeds: kept.mean_seeds,
        })
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

/// The table, drawn anew from the kept runs.
fn render() {
    KEPT.with(|kept| {
        let kept = kept.borrow();
        let mut shown: Vec<&RunRecord> = kept.runs.iter().collect();
        sort(&mut shown, kept.sort, kept.descending);
        let html = table_html(&shown, &kept.selected, (kept.sort, kept.descending));
        by_id::<HtmlElement>("runs-empty").set_hidden(!kept.runs.is_empty());
        by_id::<Element>("runs-table").set_inner_html(&html);
    });
    let overlay = overlay();
    let compared = overlay.as_ref().map_or(&[][..], |o| &o.runs[..]);
    learning::compare(compared);
    digit_map::offer(compared);
    charts::set_overlay(overlay);
}

/// The kept run with `id`.
fn find(id: &str) -> Option<RunRecord> {
    KEPT.with(|kept| kept.borrow().runs.iter().find(|run| run.id == id).cloned())
}

/// Changes what is kept, then shows it: the table and the charts.
fn change(change: impl FnOnce(&mut Kept)) {
    KEPT.with(|kept| change(&mut kept.borrow_mut()));
    render();
    charts::redraw(|| form_config().unwrap_or_default());
}

/// What a click on the table asks, by the `data-action` of what was clicked and the `data-id`
/// of its row.
async fn act(action: String, id: Option<String>) -> Result<(), PageError> {
    if let Some(column) = action.strip_prefix("sort-").and_then(Column::from_key) {
        change(|kept| {
            kept.descending = match kept.sort == column {
                true => !kept.descending,
                false => !matches!(column, Column::Name | Column::Engine),
            };
            kept.sort = column;
        });
        return Ok(());
    }
    if action == "select-all" {
        change(|kept| {
            let all = kept.runs.iter().all(|run| kept.selected.contains(&run.id));
            kept.selected = match all {
                true => BTreeSet::new(),
                false => kept.runs.iter().map(|run| run.id.clone()).collect(),
            };
        });
        return Ok(());
    }
    let Some(run) = id.as_deref().and_then(find) else {
        return Ok(());
    };
    match action.as_str() {
        "select" => change(|kept| {
            if !kept.selected.remove(&run.id) {
                kept.selected.insert(run.id.clone());
            }
        }),
        "load" => load_settings(&run)?,
        "rename" => rename(run).await?,
        "delete" => {
            run_store::delete(&run.id).await?;
            change(|kept| {
                kept.runs.retain(|kept| kept.id != run.id);
                kept.selected.remove(&run.id);
            });
            set_text("runs-status", &format!("Deleted {}", run.name));
        }
        "export" => export_run(&run).await?,
        _ => {}
    }
    Ok(())
}

/// The run's settings into the form and the page's link.
fn load_settings(run: &RunRecord) -> Result<(), PageError> {
    fill_form(&run.metrics.config);
    let config = validate_form()?;
    write_query(&config, backend_choice()?);
    let said = format!("The settings of {} are in the form", run.name);
    set_text("runs-status", &said);
    Ok(())
}

/// Asks the run's new name, and keeps it.
async fn rename(run: RunRecord) -> Result<(), PageError> {
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
    charts::redraw(|| form_config().unwrap_or_default());
    Ok(())
}

/// Offers the run as `webtrain-run-<name>.json`, with its weights where they were kept.
async fn export_run(run: &RunRecord) -> Result<(), PageError> {
    let weights = match run.engine {
        Engine::Browser => run_store::weights(&run.id).await?,
        Engine::Native => None,
    };
    let json = export::to_json(run, weights.as_deref());
    let slug: String = run
        .name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let name = format!("webtrain-run-{slug}.json");
    download::save_file(json.as_bytes(), &name, "application/json")?;
    set_text("runs-status", &format!("Exported {} as {name}", run.name));
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
                "step" => crate::chart::overlay::XAxis::Step,
                "time" => crate::chart::overlay::XAxis::Time,
                _ => crate::chart::overlay::XAxis::Epoch,
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
            charts::set_overlay(overlay());
            charts::redraw(|| form_config().unwrap_or_default());
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
