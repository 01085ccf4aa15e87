//! In headless Chromium: what the page and its training worker post to each other survives a
//! real message channel, payloads moved rather than copied.
#![cfg(target_arch = "wasm32")]

use js_sys::{ArrayBuffer, Promise};
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;
use web_sys::{MessageChannel, MessageEvent};
use webtrain::config::{ModelKind, TrainConfig};
use webtrain::device::BackendChoice;
use webtrain::session::protocol::{Envelope, Reply, Request};
use webtrain::train::{Divergence, EpochReport, TrainEvent};

wasm_bindgen_test_configure!(run_in_browser);

/// Posts `envelope` through a MessageChannel, as the page and the worker do, and reads it back;
/// also returns the sender's buffers after the post.
async fn cross<T>(envelope: Envelope<T>) -> (Envelope<T>, Vec<ArrayBuffer>)
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let (value, transfer) = envelope.to_js().unwrap();
    let channel = MessageChannel::new().unwrap();
    let port = channel.port2();
    let received = Promise::new(&mut |resolve, _| port.set_onmessage(Some(&resolve)));
    channel
        .port1()
        .post_message_with_transferable(&value, &transfer)
        .unwrap();
    let event: MessageEvent = JsFuture::from(received).await.unwrap().dyn_into().unwrap();
    let sent = transfer.iter().map(|b| b.dyn_into().unwrap()).collect();
    (
        Envelope::from_js(&event.data()).unwrap_or_else(|e| panic!("{e:?}")),
        sent,
    )
}

#[wasm_bindgen_test]
async fn a_training_request_crosses_with_its_settings() {
    let config = TrainConfig {
        model: ModelKind::LenetSmall,
        lr: 0.03,
        train_limit: Some(1234),
        ..TrainConfig::default()
    };
    let request = Request::Train {
        config: config.clone(),
        backend: BackendChoice::Gpu,
        from_model: true,
    };
    let (back, _) = cross(Envelope {
        id: 7,
        message: request,
        payloads: Vec::new(),
    })
    .await;
    assert_eq!(back.id, 7);
    let Request::Train {
        config: crossed,
        backend,
        from_model,
    } = back.message
    else {
        panic!("a training request became {:?}", back.message);
    };
    assert_eq!(
        (crossed, backend, from_model),
        (config, BackendChoice::Gpu, true)
    );
}

#[wasm_bindgen_test]
async fn payloads_are_moved_not_copied() {
    let weights: Vec<u8> = (0..=255).cycle().take(100_000).collect();
    let (back, sent) = cross(Envelope {
        id: 3,
        message: Reply::Trained {
            outcome: webtrain::train::Outcome::Completed,
            files: None,
        },
        payloads: vec![weights.clone(), Vec::new()],
    })
    .await;
    assert_eq!(back.payloads, vec![weights, Vec::new()]);
    assert!(matches!(back.message, Reply::Trained { .. }));
    // A transferred buffer is detached on the sender's side.
    assert_eq!(sent.len(), 2);
    assert!(sent.iter().all(|buffer| buffer.byte_length() == 0));
}

#[wasm_bindgen_test]
async fn an_epoch_report_crosses_whole() {
    let mut confusion = [[0; 10]; 10];
    confusion[3][5] = 2;
    confusion[7][7] = 98;
    let report = EpochReport {
        epoch: 2,
        test_loss: 0.125,
        correct: 98,
        total: 100,
        confusion,
    };
    let (back, _) = cross(Envelope {
        id: 1,
        message: Reply::Event(TrainEvent::Epoch(report.clone())),
        payloads: Vec::new(),
    })
    .await;
    assert!(matches!(back.message, Reply::Event(TrainEvent::Epoch(ref r)) if *r == report));
    assert!(back.message.is_progress(), "more follows an event");
}

#[wasm_bindgen_test]
async fn non_finite_numbers_cross_as_themselves() {
    let diverged = Divergence {
        epoch: 1,
        step: 3,
        lr: 1e6,
        loss: f32::NAN,
    };
    let (back, _) = cross(Envelope {
        id: 4,
        message: Reply::Event(TrainEvent::Diverged(diverged)),
        payloads: Vec::new(),
    })
    .await;
    let Reply::Event(TrainEvent::Diverged(crossed)) = back.message else {
        panic!("a divergence became {:?}", back.message);
    };
    assert!(crossed.loss.is_nan(), "{crossed:?}");
    assert_eq!((crossed.step, crossed.lr), (3, 1e6));

    let report = EpochReport {
        epoch: 1,
        test_loss: f32::INFINITY,
        correct: 0,
        total: 10,
        confusion: [[0; 10]; 10],
    };
    let (back, _) = cross(Envelope {
        id: 5,
        message: Reply::Evaluated(report.clone()),
        payloads: Vec::new(),
    })
    .await;
    assert!(matches!(back.message, Reply::Evaluated(ref r) if *r == report));

    let mut probabilities = [0.1; 10];
    probabilities[..3].copy_from_slice(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY]);
    let (back, _) = cross(Envelope {
        id: 6,
        message: Reply::Probabilities(probabilities),
        payloads: Vec::new(),
    })
    .await;
    let Reply::Probabilities(crossed) = back.message else {
        panic!("probabilities became {:?}", back.message);
    };
    assert!(crossed[0].is_nan());
    assert_eq!(crossed[1..], probabilities[1..]);
}

#[wasm_bindgen_test]
fn an_unreadable_message_names_its_request() {
    let value = js_sys::Object::new();
    for (key, field) in [
        ("id", wasm_bindgen::JsValue::from(9)),
        ("message", r#"{"Evaluated":{"epoch":"one"}}"#.into()),
        ("payloads", js_sys::Array::new().into()),
    ] {
        js_sys::Reflect::set(&value, &key.into(), &field).unwrap();
    }
    let error = Envelope::<Reply>::from_js(&value).unwrap_err();
    assert_eq!(error.id, Some(9));
    assert!(
        error.reason.starts_with("a bad message"),
        "{}",
        error.reason
    );
    let error = Envelope::<Reply>::from_js(&js_sys::Object::new().into()).unwrap_err();
    assert_eq!(error.id, None);
}
