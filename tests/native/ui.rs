//! `webtrain ui` as a page meets it: the real binary, its HTTP server and its WebSocket, on the
//! CPU backend. It refuses pages without the token or from another origin; it trains and writes
//! the run's files; a run outlives the tab that started it and a new tab follows it; bad and
//! oversized messages get errors and end no one's run; the corpus's file cases are refused in
//! the same words as in the browser.

use crate::common;

use crate::corpus;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use futures_util::{SinkExt, StreamExt};
use safetensors::SafeTensors;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};
use webtrain::config::{ModelKind, TrainConfig};
use webtrain::data::{TEST_IMAGES, TEST_LABELS, TRAIN_IMAGES, TRAIN_LABELS};
use webtrain::device::BackendChoice;
use webtrain::onnx::onnx_model;
use webtrain::session::envelope::{Envelope, MAX_MESSAGE_BYTES};
use webtrain::session::protocol::{
    Ask, Control, Download, Evaluate, ExportOnnx, FindLr, Follow, Followed, Gallery, ListRuns,
    LoadModel, NamedFile, Notice, Payload, Predict, Reply, Request, RunEnded, Train, UseFiles,
    WarmUp,
};
use webtrain::train::lr_find::LrRange;
use webtrain::train::{Outcome, TrainEvent};

/// `webtrain ui` on a free port, serving a page of its own, writing under a folder of its own.
struct Server {
    child: Child,
    /// `127.0.0.1:port`
    address: String,
    token: String,
    out: tempfile::TempDir,
    _dist: tempfile::TempDir,
}

impl Server {
    fn start() -> Self {
        Self::start_with(&[])
    }

    /// With `env` set in its environment.
    fn start_with(env: &[(&str, &str)]) -> Self {
        let dist = tempfile::tempdir().unwrap();
        std::fs::write(dist.path().join("index.html"), "<title>webtrain</title>").unwrap();
        let out = tempfile::tempdir().unwrap();
        let data = common::checkout().join("data/mnist");
        let mut child = Command::new(common::webtrain())
            .arg("ui")
            .args(["--port", "0", "--data"])
            .arg(&data)
            .arg("--out")
            .arg(out.path())
            .arg("--dist")
            .arg(dist.path())
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        // The rest of what it says, read so that it never waits on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let url = line
            .trim()
            .strip_prefix("webtrain ui: open http://")
            .unwrap_or_else(|| panic!("no URL in {line:?}"));
        let (address, token) = url.split_once("/?token=").unwrap();
        Server {
            child,
            address: address.to_string(),
            token: token.to_string(),
            out,
            _dist: dist,
        }
    }

    fn origin(&self) -> String {
        format!("http://{}", self.address)
    }

    async fn connect_as(
        &self,
        token: Option<&str>,
        origin: Option<&str>,
    ) -> Result<Client, tungstenite::Error> {
        let query = token.map(|t| format!("?token={t}")).unwrap_or_default();
        let mut request = format!("ws://{}/engine{query}", self.address)
            .into_client_request()
            .unwrap();
        if let Some(origin) = origin {
            request
                .headers_mut()
                .insert("Origin", origin.parse().unwrap());
        }
        let (socket, _) = connect_async(request).await?;
        Ok(Client {
            socket,
            next_id: 1,
            postponed: Vec::new(),
        })
    }

    /// A page's connection, as the page opens it.
    async fn connect(&self) -> Client {
        self.connect_as(Some(&self.token), Some(&self.origin()))
            .await
            .unwrap()
    }

    /// An HTTP GET's status and body, without a client library: one request, one answer.
    async fn get(&self, path: &str) -> (u16, String) {
        let (status, response) = self.get_with_headers(path).await;
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, body)| body.to_string())
            .unwrap_or_default();
        (status, body)
    }

    /// An HTTP GET's status and whole response, headers included.
    async fn get_with_headers(&self, path: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = TcpStream::connect(&self.address).await.unwrap();
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.address
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let status = response[9..12].parse().unwrap();
        (status, response)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Client {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u32,
    /// Replies read while waiting for another request's, kept for their own.
    postponed: Vec<Envelope>,
}

/// A request's replies: its progress, then its answer or why it failed.
struct Answered<R: Ask> {
    progress: Vec<R::Progress>,
    answer: Result<R::Answer, String>,
}

impl<R: Ask> Answered<R> {
    fn answer(self) -> R::Answer {
        self.answer.unwrap_or_else(|why| panic!("failed: {why}"))
    }
}

/// Why the engine refused a message, whichever request it belonged to.
fn refusal(envelope: Envelope) -> String {
    match envelope.open::<Notice>() {
        Ok(Notice::Failed { why }) => why,
        other => panic!("not a refusal: {other:?}"),
    }
}

impl Client {
    async fn send<R: Ask>(&mut self, request: R) -> u32 {
        let id = self.next_id;
        self.next_id += 1;
        let request: Request = request.into();
        let bytes = Envelope::seal(id, request).unwrap().to_bytes().unwrap();
        self.socket.send(Message::binary(bytes)).await.unwrap();
        id
    }

    /// The next reply, whichever request it answers.
    async fn next(&mut self) -> Envelope {
        loop {
            match self.socket.next().await {
                Some(Ok(Message::Binary(bytes))) => {
                    return Envelope::from_bytes(&bytes).unwrap_or_else(|e| panic!("{e:?}"));
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                other => panic!("the engine closed or sent {other:?}"),
            }
        }
    }

    /// The next reply to request `id`.
    async fn next_for(&mut self, id: u32) -> Envelope {
        if let Some(at) = self.postponed.iter().position(|e| e.id == id) {
            return self.postponed.remove(at);
        }
        loop {
            let envelope = self.next().await;
            if envelope.id == id {
                return envelope;
            }
            self.postponed.push(envelope);
        }
    }

    /// The replies to request `id`, an `R`, until its answer.
    async fn answer_to<R: Ask>(&mut self, id: u32) -> Answered<R> {
        let mut progress = Vec::new();
        loop {
            let reply = self
                .next_for(id)
                .await
                .open::<Reply<R::Progress, R::Answer>>();
            let answer = match reply.unwrap_or_else(|why| panic!("{why}")) {
                Reply::Progress(reported) => {
                    progress.push(reported);
                    continue;
                }
                Reply::Answer(answer) => Ok(answer),
                Reply::Failed { why } => Err(why),
            };
            return Answered { progress, answer };
        }
    }

    async fn ask<R: Ask>(&mut self, request: R) -> Answered<R> {
        let id = self.send(request).await;
        self.answer_to(id).await
    }

    async fn failure<R: Ask>(&mut self, request: R) -> String {
        match self.ask(request).await.answer {
            Err(why) => why,
            Ok(answer) => panic!("accepted: {answer:?}"),
        }
    }
}

fn small_run(train_limit: usize) -> Train {
    Train {
        config: TrainConfig {
            model: ModelKind::LenetSmall,
            epochs: 1,
            log_interval: 2,
            train_limit: Some(train_limit),
            test_limit: Some(200),
            ..TrainConfig::default()
        },
        backend: BackendChoice::Cpu,
        from_model: false,
        own_digits: None,
    }
}

fn steps<'a>(events: impl IntoIterator<Item = &'a TrainEvent>) -> usize {
    events
        .into_iter()
        .filter(|event| matches!(event, TrainEvent::Step(_)))
        .count()
}

#[tokio::test]
async fn pages_without_the_token_or_from_another_origin_are_refused() {
    let server = Server::start();
    let status = |refused: Result<Client, tungstenite::Error>| match refused {
        Err(tungstenite::Error::Http(response)) => response.status().as_u16(),
        Err(other) => panic!("refused otherwise: {other}"),
        Ok(_) => panic!("accepted"),
    };
    let origin = server.origin();
    assert_eq!(status(server.connect_as(None, Some(&origin)).await), 401);
    assert_eq!(
        status(server.connect_as(Some("guess"), Some(&origin)).await),
        401
    );
    let foreign = Some("http://evil.example");
    assert_eq!(
        status(server.connect_as(Some(&server.token), foreign).await),
        403
    );
    // Another port of this host is another origin.
    let other_port = Some("http://127.0.0.1:1");
    assert_eq!(
        status(server.connect_as(Some(&server.token), other_port).await),
        403
    );
    // The page itself needs no token, and comes with make serve's headers; a run's files
    // need the token.
    let (status, page) = server.get_with_headers("/").await;
    assert_eq!(status, 200);
    let trunk = std::fs::read_to_string(common::checkout().join("Trunk.toml")).unwrap();
    let policy = trunk
        .lines()
        .find_map(|line| line.strip_prefix("Content-Security-Policy = "))
        .unwrap()
        .trim_matches('"');
    assert!(
        page.contains(&format!("content-security-policy: {policy}\r\n")),
        "{page}"
    );
    assert!(
        page.contains("x-content-type-options: nosniff\r\n"),
        "{page}"
    );
    assert_eq!(server.get("/runs/x/metrics.json").await.0, 401);
    assert_eq!(server.get("/runs/x/metrics.json?token=guess").await.0, 401);
}

#[tokio::test]
async fn a_page_trains_natively_and_the_run_files_are_written_and_served() {
    let server = Server::start();
    let mut page = server.connect().await;
    let data = page.ask(Download {}).await.answer();
    assert_eq!((data.train, data.test), (60000, 10000));
    let trained = page.ask(small_run(512)).await;
    assert_eq!(steps(&trained.progress), 8);
    let ended = trained.answer();
    assert_eq!(ended.outcome, Outcome::Completed);
    let files = ended.files.unwrap();
    assert_eq!(files.error, None);
    for name in [
        "checkpoint.safetensors",
        "loss.svg",
        "metrics.json",
        "model.bpk",
        "model.safetensors",
    ] {
        assert!(
            files.written.iter().any(|w| w == name),
            "{:?}",
            files.written
        );
        assert!(server.out.path().join(&files.name).join(name).is_file());
    }
    // The weights the page gets are those written.
    let written = std::fs::read(PathBuf::from(&files.folder).join("model.safetensors")).unwrap();
    // "Download ONNX" gets the run's model as `webtrain export --onnx` writes it.
    let onnx = page.ask(ExportOnnx {}).await.answer();
    let exported = onnx_model(&written, ModelKind::LenetSmall).unwrap();
    assert!(*onnx.bytes() == *exported, "the page's ONNX differs");
    let sent = ended.weights.bytes().to_vec();
    let (sent, written) = (
        SafeTensors::deserialize(&sent).unwrap(),
        SafeTensors::deserialize(&written).unwrap(),
    );
    assert_eq!(sent.len(), 8);
    for (name, tensor) in sent.tensors() {
        assert_eq!(
            tensor.data(),
            written.tensor(&name).unwrap().data(),
            "{name}"
        );
    }
    let (status, body) = server
        .get(&format!(
            "/runs/{}/metrics.json?token={}",
            files.name, server.token
        ))
        .await;
    assert_eq!(status, 200);
    let metrics: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(metrics["config"]["train_limit"], 512);
    // The model is the engine's current one: the page's model tools ask it.
    let evaluated = page.ask(Evaluate { len: 100 }).await.answer();
    assert_eq!(evaluated.total, 100);
}

#[tokio::test]
async fn a_run_outlives_its_tab_and_a_new_tab_follows_and_steers_it() {
    let server = Server::start();
    let mut first = server.connect().await;
    first.ask(Download {}).await.answer();
    let id = first.send(small_run(12800)).await;
    // The tab closes once the run has begun.
    loop {
        let reply = first
            .next_for(id)
            .await
            .open::<Reply<TrainEvent, RunEnded>>();
        if let Ok(Reply::Progress(TrainEvent::Step(_))) = reply {
            break;
        }
    }
    drop(first);
    let mut second = server.connect().await;
    // Paused first, so that it cannot end before the new tab has seen it.
    second.ask(Control::Pause).await.answer();
    // A second run is refused while this one goes.
    let busy = second.failure(small_run(64)).await;
    assert!(busy.contains("already going"), "{busy}");
    let follow = second.send(Follow {}).await;
    let steering = [
        second.send(Control::SetLr { lr: 0.02 }).await,
        second.send(Control::Resume).await,
    ];
    let followed = second.answer_to::<Follow>(follow).await;
    let Some(Followed::Run { config, .. }) = followed.progress.first() else {
        panic!("a follower first hears which run it follows")
    };
    assert_eq!(config.train_limit, Some(12800));
    let events: Vec<&TrainEvent> = followed
        .progress
        .iter()
        .filter_map(|followed| match followed {
            Followed::Event(event) => Some(event),
            Followed::Run { .. } => None,
        })
        .collect();
    // Every step of the run reached the follower: those before it joined, and the rest.
    assert_eq!(steps(events.iter().copied()), 200);
    assert!(events.iter().any(|event| matches!(
        event,
        TrainEvent::LrChanged { lr, .. } if *lr == 0.02
    )));
    // The pause the new tab asked for reaches whoever shows the run, and so does the resume.
    let paused = events
        .iter()
        .position(|event| matches!(event, TrainEvent::Paused { .. }));
    let resumed = events
        .iter()
        .position(|event| matches!(event, TrainEvent::Resumed { .. }));
    assert!(
        paused < resumed && paused.is_some(),
        "{paused:?} {resumed:?}"
    );
    let ended = followed.answer().expect("the run it followed");
    assert_eq!(ended.outcome, Outcome::Completed);
    assert!(!ended.weights.bytes().is_empty());
    for id in steering {
        second.answer_to::<Control>(id).await.answer();
    }
    // With no run going, a follower hears so at once.
    assert!(second.ask(Follow {}).await.answer().is_none());
}

/// A request that panics inside the engine, past what it took hold of, of each kind a page
/// asks beside a run, ends with the panic's message; the engine answers the next request and
/// is not left busy, the run going keeps on, and Ctrl-C then stops it with its files written.
#[cfg_attr(
    not(debug_assertions),
    ignore = "the fault hook is in debug builds only"
)]
#[tokio::test]
async fn a_panic_in_a_request_ends_that_request_and_nothing_else() {
    let faults = ["FindLr", "WarmUp", "Evaluate", "Gallery", "Predict"];
    let mut server = Server::start_with(&[("WEBTRAIN_PANIC_IN_REQUEST", &faults.join(","))]);
    let mut page = server.connect().await;
    page.ask(Download {}).await.answer();
    // A model to ask about.
    let first = page.ask(small_run(640)).await.answer();
    assert_eq!(first.outcome, Outcome::Completed);
    let config = small_run(64).config;
    let backend = BackendChoice::Cpu;
    let mut failures = vec![
        page.failure(FindLr {
            config: config.clone(),
            backend,
            from_model: false,
            range: LrRange::default(),
        })
        .await,
        page.failure(WarmUp { config, backend }).await,
    ];
    // Not left busy by the range test's panic: a run starts, and while it goes (paused) the
    // views' requests fail inside, one by one.
    page.send(small_run(12800)).await;
    page.ask(Control::Pause).await.answer();
    failures.push(page.failure(Evaluate { len: 100 }).await);
    failures.push(page.failure(Gallery {}).await);
    failures.push(
        page.failure(Predict {
            pixels: Payload::from(vec![0; 28 * 28]),
        })
        .await,
    );
    for (kind, why) in faults.iter().zip(&failures) {
        assert!(
            why.contains(&format!("a panic provoked in a {kind} request")),
            "{kind}: {why}"
        );
    }
    page.ask(ListRuns {}).await.answer();
    // Ctrl-C stops the run going and writes its files before the engine exits.
    let interrupted = Command::new("kill")
        .args(["-INT", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    server.child.wait().unwrap();
    let mut folders: Vec<PathBuf> = std::fs::read_dir(server.out.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    folders.sort();
    assert_eq!(folders.len(), 2, "{folders:?}");
    for folder in &folders {
        for file in ["metrics.json", "model.safetensors"] {
            assert!(folder.join(file).is_file(), "{folder:?} has no {file}");
        }
    }
}

/// A panic as a run's end is answered (after its files are written) leaves the engine free:
/// a second run starts rather than finding it busy.
#[tokio::test]
async fn a_panic_as_a_run_ends_leaves_the_engine_free() {
    let server = Server::start_with(&[("WEBTRAIN_PANIC_IN_REQUEST", "Train")]);
    let mut page = server.connect().await;
    page.ask(Download {}).await.answer();
    for _ in 0..2 {
        let why = page.failure(small_run(128)).await;
        assert!(why.contains("a panic provoked in a Train request"), "{why}");
    }
    let folders: Vec<PathBuf> = std::fs::read_dir(server.out.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(folders.len(), 2, "{folders:?}");
    for folder in &folders {
        for file in ["metrics.json", "model.safetensors"] {
            assert!(folder.join(file).is_file(), "{folder:?} has no {file}");
        }
    }
}

#[tokio::test]
async fn bad_and_oversized_messages_get_errors_and_end_no_run() {
    let server = Server::start();
    let mut trainer = server.connect().await;
    trainer.ask(Download {}).await.answer();
    let run = trainer.send(small_run(3200)).await;
    // Held while the others misbehave: it ends when they are done, with no model before.
    let pause = trainer.send(Control::Pause).await;

    let mut other = server.connect().await;
    // Not an envelope: answered as unasked (id 0).
    other
        .socket
        .send(Message::binary(vec![1, 2]))
        .await
        .unwrap();
    let reply = other.next().await;
    assert_eq!(reply.id, 0);
    let why = refusal(reply);
    assert!(why.contains("without an id"), "{why}");
    // An envelope whose body is no request: answered under its id.
    for json in [r#"{"x""#, r#"{"Evaluate":{"len":"all"}}"#] {
        let envelope = Envelope {
            id: 7,
            json: json.into(),
            payloads: Vec::new(),
        };
        let bytes = envelope.to_bytes().unwrap();
        other.socket.send(Message::binary(bytes)).await.unwrap();
        let reply = other.next().await;
        assert_eq!(reply.id, 7);
        let why = refusal(reply);
        assert!(why.contains("bad message"), "{why}");
    }
    // Framing cut short: answered under its id too.
    let mut bytes = 8u32.to_le_bytes().to_vec();
    bytes.extend(5u32.to_le_bytes());
    bytes.extend(b"{}");
    other.socket.send(Message::binary(bytes)).await.unwrap();
    let reply = other.next().await;
    assert_eq!(reply.id, 8);
    let why = refusal(reply);
    assert!(why.contains("cut short"), "{why}");
    other.socket.send(Message::text("hello")).await.unwrap();
    let why = refusal(other.next().await);
    assert!(why.contains("text"), "{why}");
    // A question about a model the engine does not have yet.
    let pixels = Payload::from(vec![0; 10]);
    let why = other.failure(Predict { pixels }).await;
    assert!(why.contains("no model yet"), "{why}");
    let why = other.failure(ExportOnnx {}).await;
    assert!(why.contains("no model yet"), "{why}");
    // Too large: this connection is closed with 1009, and no other.
    let oversized = vec![0u8; MAX_MESSAGE_BYTES + 1];
    let _ = other.socket.send(Message::binary(oversized)).await;
    let closed = loop {
        match other.socket.next().await {
            Some(Ok(Message::Close(frame))) => break frame,
            Some(Ok(_)) => continue,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(u16::from(closed.unwrap().code), 1009);
    trainer.answer_to::<Control>(pause).await.answer();
    trainer.send(Control::Resume).await;
    let trained = trainer.answer_to::<Train>(run).await.answer();
    assert_eq!(trained.outcome, Outcome::Completed);
}

#[tokio::test]
async fn the_corpus_files_and_settings_are_refused_through_the_socket() {
    let server = Server::start();
    let mut page = server.connect().await;
    let mnist = common::checkout().join("data/mnist");
    let read = |name: &str| std::fs::read(mnist.join(format!("{name}.gz"))).unwrap();
    let (test_images, test_labels) = (read(TEST_IMAGES), read(TEST_LABELS));
    page.ask(Download {}).await.answer();
    let mut checked = 0;
    for case in corpus::cases().await {
        let why = match case.input {
            corpus::Input::Idx { images, labels } => {
                let names = [TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS];
                let bytes = [images, labels, test_images.clone(), test_labels.clone()];
                let files = names
                    .into_iter()
                    .zip(bytes)
                    .map(|(name, bytes)| NamedFile {
                        name: name.to_string(),
                        bytes: bytes.into(),
                    })
                    .collect();
                page.failure(UseFiles { files, seed: 1 }).await
            }
            corpus::Input::Weights(bytes) => {
                let weights = Payload::from(bytes);
                page.failure(LoadModel {
                    kind: ModelKind::Lenet,
                    weights,
                })
                .await
            }
            // What JSON can carry of a setting reaches the engine's own checks; the rest is
            // not a request at all.
            corpus::Input::Setting { name, value } => {
                let mut config = serde_json::to_value(TrainConfig::default()).unwrap();
                config[name] = serde_json::from_str(value)
                    .ok()
                    .filter(serde_json::Value::is_number)
                    .unwrap_or_else(|| value.into());
                let request = serde_json::json!({"Train": {
                    "config": config, "backend": "cpu", "from_model": false
                }});
                let mut bytes = 99u32.to_le_bytes().to_vec();
                let json = serde_json::to_vec(&request).unwrap();
                bytes.extend((json.len() as u32).to_le_bytes());
                bytes.extend(json);
                bytes.extend(0u32.to_le_bytes());
                page.socket.send(Message::binary(bytes)).await.unwrap();
                let why = match page.answer_to::<Train>(99).await.answer {
                    Err(why) => why,
                    Ok(ended) => panic!("{}: accepted: {ended:?}", case.name),
                };
                if why.contains("could not read the request") {
                    checked += 1;
                    continue;
                }
                why
            }
            // The page resumes no checkpoint, and reads its link's query itself.
            corpus::Input::Checkpoint(bytes) => {
                drop(bytes);
                continue;
            }
            corpus::Input::Query(_) => continue,
        };
        assert!(
            why.contains(case.expected),
            "{}: expected '{}' in {why}",
            case.name,
            case.expected
        );
        checked += 1;
    }
    assert!(checked >= 40, "{checked} cases");
    // The engine still trains after all of them.
    page.ask(Download {}).await.answer();
    page.ask(small_run(128)).await.answer();
}
