//! `webtrain ui`: the page, served with a WebSocket over which it drives a native engine (the
//! CLI's devices: a hardware GPU through wgpu, or every core). Bound to 127.0.0.1 unless told
//! otherwise, and only pages holding the printed token, served from here, may drive it.

mod socket;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crate::session::envelope::MAX_MESSAGE_BYTES;
use crate::session::protocol::{Control, Follow};
use axum::Router;
use axum::extract::{Query, Request, State, WebSocketUpgrade};
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tower_http::services::ServeDir;

use super::CliError;
use crate::native::{Engine, say, warn};

#[derive(clap::Args)]
pub struct UiArgs {
    /// Directory with the four MNIST IDX files (raw or .gz).
    #[arg(long, default_value = "data/mnist")]
    data: PathBuf,
    /// Where each run started from the page writes its files, in a folder of its own.
    #[arg(long, default_value = "runs")]
    out: PathBuf,
    /// The page as trunk builds it (`make ui` builds it).
    #[arg(long, default_value = "dist")]
    dist: PathBuf,
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// The address to listen on; another than 127.0.0.1 lets other machines reach the page
    /// (they still need the token).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Open the page in the default browser.
    #[arg(long)]
    open: bool,
}

struct App {
    token: String,
    engine: Engine,
}

type Shared = Arc<App>;

/// A fresh random token, as Jupyter's.
fn new_token() -> Result<String, CliError> {
    let mut bytes = [0u8; 24];
    getrandom_04::fill(&mut bytes).map_err(|e| CliError::Serve(format!("no randomness: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

pub fn run(args: UiArgs) -> Result<(), CliError> {
    if !args.dist.join("index.html").is_file() {
        return Err(CliError::Serve(format!(
            "{} holds no page: build it first (make ui builds it and starts this)",
            args.dist.display()
        )));
    }
    std::fs::create_dir_all(&args.out).map_err(|source| CliError::Write {
        path: args.out.clone(),
        source,
    })?;
    let app = Arc::new(App {
        token: new_token()?,
        engine: Engine::start(args.data.clone(), args.out.clone()),
    });
    stop_on_interrupt(app.engine.clone())?;
    let runtime = tokio::runtime::Runtime::new().map_err(|e| CliError::Serve(e.to_string()))?;
    runtime.block_on(serve(args, app))
}

async fn serve(args: UiArgs, app: Shared) -> Result<(), CliError> {
    let address = format!("{}:{}", args.host, args.port);
    let listener = tokio::net::TcpListener::bind(&address)
        .await
        .map_err(|e| CliError::Serve(format!("cannot listen on {address}: {e}")))?;
    let bound: SocketAddr = listener
        .local_addr()
        .map_err(|e| CliError::Serve(e.to_string()))?;
    let url = format!("http://{bound}/?token={}", app.token);
    let runs = Router::new()
        .fallback_service(ServeDir::new(&args.out))
        .layer(middleware::from_fn_with_state(app.clone(), require_token));
    let router = Router::new()
        .route("/engine", get(open_socket))
        .nest("/runs", runs)
        .fallback_service(ServeDir::new(&args.dist))
        .layer(middleware::map_response(with_page_headers))
        .with_state(app);
    say(&format!("webtrain ui: open {url}"));
    say(&format!(
        "Runs started from the page write to {}",
        args.out.display()
    ));
    if args.open
        && let Err(error) = open::that(&url)
    {
        warn(&format!("cannot open a browser ({error}); open {url}"));
    }
    axum::serve(listener, router)
        .await
        .map_err(|e| CliError::Serve(e.to_string()))
}

type Params = Query<HashMap<String, String>>;

async fn open_socket(
    upgrade: WebSocketUpgrade,
    Query(params): Params,
    headers: HeaderMap,
    State(app): State<Shared>,
) -> Response {
    let given = params.get("token").map(String::as_str);
    if let Some(refused) = socket::refusal(holds_token(&app.token, given), &headers) {
        return refused.into_response();
    }
    let engine = app.engine.clone();
    upgrade
        .max_message_size(MAX_MESSAGE_BYTES)
        .max_frame_size(MAX_MESSAGE_BYTES)
        .on_upgrade(move |socket| socket::serve(socket, engine))
}

/// The headers `make serve` sends with the page (Trunk.toml's `[serve.headers]`, read from
/// there so that the two never differ): what a `<meta>` cannot say, and the policy the worker
/// takes from its script's response.
fn page_headers() -> &'static [(HeaderName, HeaderValue)] {
    static HEADERS: OnceLock<Vec<(HeaderName, HeaderValue)>> = OnceLock::new();
    HEADERS.get_or_init(|| {
        let trunk = include_str!("../../../Trunk.toml");
        let section = trunk.split("[serve.headers]").nth(1).unwrap_or_default();
        section
            .lines()
            .take_while(|line| !line.starts_with('['))
            .filter_map(|line| {
                let (name, value) = line.split_once(" = ")?;
                let value = value.trim().strip_prefix('"')?.strip_suffix('"')?;
                Some((name.trim().parse().ok()?, value.parse().ok()?))
            })
            .collect()
    })
}

async fn with_page_headers(mut response: Response) -> Response {
    for (name, value) in page_headers() {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    response
}

/// Whether `given` is `token`, compared in a time that does not depend on where they differ:
/// a page elsewhere cannot guess it a character at a time.
fn holds_token(token: &str, given: Option<&str>) -> bool {
    use subtle::ConstantTimeEq;
    given.is_some_and(|given| bool::from(token.as_bytes().ct_eq(given.as_bytes())))
}

/// A run's files only with the token: they are the user's.
async fn require_token(
    State(app): State<Shared>,
    Query(params): Params,
    request: Request,
    next: Next,
) -> Response {
    match holds_token(&app.token, params.get("token").map(String::as_str)) {
        true => next.run(request).await,
        false => (
            axum::http::StatusCode::UNAUTHORIZED,
            "webtrain ui: a valid token is needed",
        )
            .into_response(),
    }
}

/// Ctrl-C (or SIGTERM) stops the run going, waits until its files are written and exits; a
/// second one exits at once.
fn stop_on_interrupt(engine: Engine) -> Result<(), CliError> {
    let interrupted = AtomicBool::new(false);
    ctrlc::set_handler(move || {
        if interrupted.swap(true, Ordering::SeqCst) {
            std::process::exit(super::INTERRUPTED_EXIT);
        }
        warn("stopping the run going, if any, and writing its files (again to quit now)");
        engine.ask_and_wait(Control::Stop);
        // Answered when the run has ended and its files are written, or at once without one.
        engine.ask_and_wait(Follow {});
        std::process::exit(super::INTERRUPTED_EXIT);
    })
    .map_err(|e| CliError::Signal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::holds_token;

    #[test]
    fn only_the_token_itself_holds_it() {
        let token = "0123456789abcdef";
        assert!(holds_token(token, Some(token)));
        for given in [
            None,
            Some(""),
            Some("0123456789abcdee"),
            Some("0123456789abcde"),
            Some("0123456789abcdef0"),
        ] {
            assert!(!holds_token(token, given), "{given:?}");
        }
    }
}
