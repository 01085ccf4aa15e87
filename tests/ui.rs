//! `webtrain ui` as a page meets it: the real binary, its HTTP server and its WebSocket, on the
//! CPU backend. It refuses pages without the token or from another origin; it trains and writes
//! the run's files; a run outlives the tab that started it and a new tab follows it; bad and
//! oversized messages get errors and end no one's run; the corpus's file cases are refused in
//! the same words as in the browser.
#![cfg(not(target_arch = "wasm32"))]

mod corpus;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
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
use webtrain::session::protocol::{Envelope, MAX_MESSAGE_BYTES, Reply, Request};
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
        let dist = tempfile::tempdir().unwrap();
        std::fs::write(dist.path().join("index.html"), "<title>webtrain</title>").unwrap();
        let out = tempfile::tempdir().unwrap();
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/mnist");
        let mut child = Command::new(env!("CARGO_BIN_EXE_webtrain"))
            .arg("ui")
            .args(["--port", "0", "--data"])
            .arg(&data)
            .arg("--out")
            .arg(out.path())
            .arg("--dist")
            .arg(dist.path())
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
        Ok(Client { socket, next_id: 1 })
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
}

/// A request's replies: its progress, then its answer and the answer's payloads.
struct Answered {
    progress: Vec<Reply>,
    reply: Reply,
    payloads: Vec<Vec<u8>>,
}

impl Client {
    async fn send(&mut self, request: Request, payloads: Vec<Vec<u8>>) -> u32 {
        let id = self.next_id;
        self.next_id += 1;
        let envelope = Envelope {
            id,
            message: request,
            payloads,
        };
        let bytes = envelope.to_bytes().unwrap();
        self.socket.send(Message::binary(bytes)).await.unwrap();
        id
    }

    /// The next reply, whichever request it answers.
    async fn next(&mut self) -> Envelope<Reply> {
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

    /// The replies to request `id` until its answer; `on_progress` sees each progress reply.
    async fn answer_to(&mut self, id: u32, mut on_progress: impl FnMut(&Reply)) -> Answered {
        let mut progress = Vec::new();
        loop {
            let envelope = self.next().await;
            if envelope.id != id {
                continue;
            }
            if !envelope.message.is_progress() {
                return Answered {
                    progress,
                    reply: envelope.message,
                    payloads: envelope.payloads,
                };
            }
            on_progress(&envelope.message);
            progress.push(envelope.message);
        }
    }

    async fn ask(&mut self, request: Request, payloads: Vec<Vec<u8>>) -> Answered {
        let id = self.send(request, payloads).await;
        self.answer_to(id, |_| {}).await
    }

    async fn failure(&mut self, request: Request, payloads: Vec<Vec<u8>>) -> String {
        match self.ask(request, payloads).await.reply {
            Reply::Failed(why) => why,
            other => panic!("accepted: {other:?}"),
        }
    }
}

fn small_run(train_limit: usize) -> Request {
    Request::Train {
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
    }
}

fn steps(progress: &[Reply]) -> usize {
    progress
        .iter()
        .filter(|reply| matches!(reply, Reply::Event(TrainEvent::Step(_))))
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
    let trunk =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Trunk.toml")).unwrap();
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
    let data = page.ask(Request::Download, Vec::new()).await;
    assert!(
        matches!(
            data.reply,
            Reply::Data {
                train: 60000,
                test: 10000
            }
        ),
        "{:?}",
        data.reply
    );
    let trained = page.ask(small_run(512), Vec::new()).await;
    let Reply::Trained {
        outcome: Outcome::Completed,
        files: Some(files),
    } = trained.reply
    else {
        panic!("{:?}", trained.reply)
    };
    assert_eq!(steps(&trained.progress), 8);
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
    assert_eq!(trained.payloads.len(), 1);
    let (sent, written) = (
        SafeTensors::deserialize(&trained.payloads[0]).unwrap(),
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
    let evaluated = page.ask(Request::Evaluate { len: 100 }, Vec::new()).await;
    assert!(matches!(evaluated.reply, Reply::Evaluated(ref r) if r.total == 100));
}

#[tokio::test]
async fn a_run_outlives_its_tab_and_a_new_tab_follows_and_steers_it() {
    let server = Server::start();
    let mut first = server.connect().await;
    first.ask(Request::Download, Vec::new()).await;
    let id = first.send(small_run(12800), Vec::new()).await;
    // The tab closes once the run has begun.
    loop {
        let envelope = first.next().await;
        if envelope.id == id && matches!(envelope.message, Reply::Event(TrainEvent::Step(_))) {
            break;
        }
    }
    drop(first);
    let mut second = server.connect().await;
    // Paused first, so that it cannot end before the new tab has seen it.
    assert!(matches!(
        second.ask(Request::Pause, Vec::new()).await.reply,
        Reply::Done
    ));
    // A second run is refused while this one goes.
    let busy = second.failure(small_run(64), Vec::new()).await;
    assert!(busy.contains("already going"), "{busy}");
    let follow = second.send(Request::Follow, Vec::new()).await;
    let first_reply = second.next().await;
    let Reply::Run { config, .. } = first_reply.message else {
        panic!("{:?}", first_reply.message)
    };
    assert_eq!(config.train_limit, Some(12800));
    second.send(Request::SetLr(0.02), Vec::new()).await;
    second.send(Request::Resume, Vec::new()).await;
    let mut progress = Vec::new();
    let ended = loop {
        let envelope = second.next().await;
        if envelope.id != follow {
            assert!(
                matches!(envelope.message, Reply::Done),
                "{:?}",
                envelope.message
            );
        } else if envelope.message.is_progress() {
            progress.push(envelope.message);
        } else {
            break envelope;
        }
    };
    // Every step of the run reached the follower: those before it joined, and the rest.
    assert_eq!(steps(&progress), 200);
    assert!(progress.iter().any(|reply| matches!(
        reply,
        Reply::Event(TrainEvent::LrChanged { lr, .. }) if *lr == 0.02
    )));
    assert!(matches!(
        ended.message,
        Reply::Trained {
            outcome: Outcome::Completed,
            ..
        }
    ));
    assert_eq!(ended.payloads.len(), 1);
    // With no run going, a follower hears so at once.
    assert!(matches!(
        second.ask(Request::Follow, Vec::new()).await.reply,
        Reply::NoRun
    ));
}

#[tokio::test]
async fn bad_and_oversized_messages_get_errors_and_end_no_run() {
    let server = Server::start();
    let mut trainer = server.connect().await;
    trainer.ask(Request::Download, Vec::new()).await;
    let run = trainer.send(small_run(3200), Vec::new()).await;
    // Held while the others misbehave: it ends when they are done, with no model before.
    let pause = trainer.send(Request::Pause, Vec::new()).await;

    let mut other = server.connect().await;
    // Not an envelope: answered as unasked (id 0).
    other
        .socket
        .send(Message::binary(vec![1, 2]))
        .await
        .unwrap();
    let reply = other.next().await;
    assert_eq!(reply.id, 0);
    assert!(matches!(reply.message, Reply::Failed(ref why) if why.contains("without an id")));
    // An envelope whose body is no request: answered under its id.
    let mut bytes = 7u32.to_le_bytes().to_vec();
    bytes.extend(5u32.to_le_bytes());
    bytes.extend(b"{\"x\"");
    bytes.extend(0u32.to_le_bytes());
    other.socket.send(Message::binary(bytes)).await.unwrap();
    let reply = other.next().await;
    assert_eq!(reply.id, 7);
    assert!(matches!(reply.message, Reply::Failed(ref why) if why.contains("bad message")));
    other.socket.send(Message::text("hello")).await.unwrap();
    assert!(matches!(other.next().await.message, Reply::Failed(ref why) if why.contains("text")));
    // A question about a model the engine does not have yet.
    let why = other.failure(Request::Predict, vec![vec![0; 10]]).await;
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
    assert!(matches!(
        trainer.answer_to(pause, |_| {}).await.reply,
        Reply::Done
    ));
    trainer.send(Request::Resume, Vec::new()).await;
    let trained = trainer.answer_to(run, |_| {}).await;
    assert!(
        matches!(
            trained.reply,
            Reply::Trained {
                outcome: Outcome::Completed,
                ..
            }
        ),
        "{:?}",
        trained.reply
    );
}

#[tokio::test]
async fn the_corpus_files_and_settings_are_refused_through_the_socket() {
    let server = Server::start();
    let mut page = server.connect().await;
    let mnist = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/mnist");
    let read = |name: &str| std::fs::read(mnist.join(format!("{name}.gz"))).unwrap();
    let (test_images, test_labels) = (read(TEST_IMAGES), read(TEST_LABELS));
    page.ask(Request::Download, Vec::new()).await;
    let mut checked = 0;
    for case in corpus::cases().await {
        let why = match case.input {
            corpus::Input::Idx { images, labels } => {
                let names = [TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS];
                let names = names.map(String::from).to_vec();
                let files = vec![images, labels, test_images.clone(), test_labels.clone()];
                page.failure(Request::UseFiles { names }, files).await
            }
            corpus::Input::Weights(bytes) => {
                page.failure(Request::LoadModel(ModelKind::Lenet), vec![bytes])
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
                let why = match page.answer_to(99, |_| {}).await.reply {
                    Reply::Failed(why) => why,
                    other => panic!("{}: accepted: {other:?}", case.name),
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
    page.ask(Request::Download, Vec::new()).await;
    let trained = page.ask(small_run(128), Vec::new()).await;
    assert!(
        matches!(trained.reply, Reply::Trained { .. }),
        "{:?}",
        trained.reply
    );
}
