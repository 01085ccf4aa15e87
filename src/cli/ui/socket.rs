//! One page's WebSocket: only with the token and from the page's own origin; each binary message
//! an [`Envelope`] for the engine, each reply one back. A message the engine cannot read is
//! answered `Failed`; one too large closes this connection (1009), and no other.

use crate::session::envelope::{BadMessage, Envelope, MAX_MESSAGE_BYTES};
use crate::session::failure;
use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use axum::http::{HeaderMap, StatusCode, header};
use tokio::sync::mpsc;

use crate::native::{Engine, Job};

/// Why a connection is refused before it is a WebSocket: without the token, or from another
/// origin.
pub fn refusal(holds_token: bool, headers: &HeaderMap) -> Option<(StatusCode, String)> {
    if !holds_token {
        return Some((
            StatusCode::UNAUTHORIZED,
            "webtrain ui: a valid token is needed; open the URL webtrain ui printed".into(),
        ));
    }
    // A browser always says which page opens a WebSocket: only the one this server serves may.
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    match (origin, host) {
        (None, _) => None,
        (Some(origin), Some(host)) if origin == format!("http://{host}") => None,
        (Some(origin), _) => Some((
            StatusCode::FORBIDDEN,
            format!("webtrain ui: pages from {origin} may not drive this engine"),
        )),
    }
}

/// Serves one page until it goes; what it started goes on in the engine.
pub async fn serve(mut socket: WebSocket, engine: Engine) {
    let (replies, mut outgoing) = mpsc::unbounded_channel::<Envelope>();
    loop {
        tokio::select! {
            received = socket.recv() => {
                let message = match received {
                    Some(Ok(message)) => message,
                    Some(Err(error)) => {
                        // Too large, or not WebSocket at all: said, and this page is let go.
                        let frame = CloseFrame {
                            code: close_code::SIZE,
                            reason: format!("{error} (at most {MAX_MESSAGE_BYTES} bytes)").into(),
                        };
                        let _ = socket.send(Message::Close(Some(frame))).await;
                        return;
                    }
                    None => return,
                };
                let request = match message {
                    Message::Binary(bytes) => Envelope::from_bytes(&bytes),
                    Message::Text(_) => Err(BadMessage {
                        id: None,
                        reason: "a text message; the engine reads binary ones".into(),
                    }),
                    Message::Close(_) => return,
                    Message::Ping(_) | Message::Pong(_) => continue,
                };
                match request {
                    Ok(request) => {
                        let job = Job { request, replies: replies.clone() };
                        if !engine.ask(job) {
                            let _ = replies.send(failure(0, "the engine has stopped".into()));
                        }
                    }
                    // Id 0 when the message had none: the page hears it as unasked.
                    Err(BadMessage { id, reason }) => {
                        let why = format!("the engine could not read the request: {reason}");
                        let _ = replies.send(failure(id.unwrap_or(0), why));
                    }
                }
            }
            Some(reply) = outgoing.recv() => {
                let bytes = match reply.to_bytes() {
                    Ok(bytes) => bytes,
                    Err(why) => match failure(reply.id, why).to_bytes() {
                        Ok(bytes) => bytes,
                        Err(_) => continue,
                    },
                };
                if socket.send(Message::Binary(bytes.into())).await.is_err() {
                    return;
                }
            }
        }
    }
}
