//! In headless Chromium: what the page and its training worker post to each other survives a
//! real message channel, payloads moved rather than copied.

use js_sys::{ArrayBuffer, Promise};
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;
use web_sys::{MessageChannel, MessageEvent};
use webtrain::config::{ModelKind, TrainConfig};
use webtrain::device::BackendChoice;
use webtrain::session::envelope::Envelope;
use webtrain::session::protocol::{
    Ask, Evaluate, Payload, Predict, Probabilities, Reply, Request, RunEnded, Train,
};
use webtrain::train::{Divergence, EpochReport, Outcome, TrainEvent};

/// Posts `envelope` through a MessageChannel, as the page and the worker do, and reads it back;
/// also returns the sender's buffers after the post.
async fn cross(envelope: Envelope) -> (Envelope, Vec<ArrayBuffer>) {
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

/// A reply to an `R`, across the channel and read as the page reads it.
async fn reply_crosses<R: Ask>(
    reply: Reply<R::Progress, R::Answer>,
) -> Reply<R::Progress, R::Answer> {
    let (back, _) = cross(Envelope::seal(1, reply).unwrap()).await;
    back.open().unwrap()
}

#[wasm_bindgen_test]
async fn a_training_request_crosses_with_its_settings() {
    let config = TrainConfig {
        model: ModelKind::LenetSmall,
        lr: 0.03,
        train_limit: Some(1234),
        ..TrainConfig::default()
    };
    let request = Request::from(Train {
        config: config.clone(),
        backend: BackendChoice::Gpu,
        from_model: true,
        own_digits: None,
    });
    let (back, _) = cross(Envelope::seal(7, request).unwrap()).await;
    assert_eq!(back.id, 7);
    let Request::Train(crossed) = back.open().unwrap() else {
        panic!("a training request became another");
    };
    assert_eq!(
        (crossed.config, crossed.backend, crossed.from_model),
        (config, BackendChoice::Gpu, true)
    );
}

#[wasm_bindgen_test]
async fn payloads_are_moved_not_copied() {
    let weights: Vec<u8> = (0..=255).cycle().take(100_000).collect();
    let ended = RunEnded {
        outcome: Outcome::Completed,
        weights: Payload::from(weights.clone()),
        files: None,
        fine_tuned: None,
    };
    let sealed = Envelope::seal(3, Reply::<TrainEvent, _>::Answer(ended)).unwrap();
    assert!(sealed.json.len() < 200, "the bytes are not in the JSON");
    let (back, sent) = cross(sealed).await;
    // A transferred buffer is detached on the sender's side.
    assert_eq!(sent.len(), 1);
    assert!(sent.iter().all(|buffer| buffer.byte_length() == 0));
    let Ok(Reply::Answer(crossed)) = back.open::<Reply<TrainEvent, RunEnded>>() else {
        panic!("a run's end became another reply");
    };
    assert_eq!(crossed.weights.into_bytes(), weights);
    // A request's payload too.
    let pixels = Payload::from(vec![255; 784]);
    let request = Request::from(Predict { pixels });
    let (back, sent) = cross(Envelope::seal(4, request).unwrap()).await;
    assert_eq!(sent[0].byte_length(), 0);
    let Ok(Request::Predict(crossed)) = back.open() else {
        panic!("a digit became another request");
    };
    assert_eq!(crossed.pixels.into_bytes(), vec![255; 784]);
}

#[wasm_bindgen_test]
async fn an_epoch_report_crosses_whole_as_progress() {
    let mut confusion = [[0; 10]; 10];
    confusion[3][5] = 2;
    confusion[7][7] = 98;
    let report = EpochReport {
        epoch: 2,
        test_loss: 0.125,
        correct: 98,
        total: 100,
        confusion: Box::new(confusion),
    };
    let event = TrainEvent::Epoch(report.clone());
    let back = reply_crosses::<Train>(Reply::Progress(event)).await;
    assert!(matches!(back, Reply::Progress(TrainEvent::Epoch(ref r)) if *r == report));
}

#[wasm_bindgen_test]
async fn non_finite_numbers_cross_as_themselves() {
    let diverged = Divergence {
        epoch: 1,
        step: 3,
        lr: 1e6,
        loss: f32::NAN,
    };
    let event = TrainEvent::Diverged(diverged);
    let Reply::Progress(TrainEvent::Diverged(crossed)) =
        reply_crosses::<Train>(Reply::Progress(event)).await
    else {
        panic!("a divergence became another reply");
    };
    assert!(crossed.loss.is_nan(), "{crossed:?}");
    assert_eq!((crossed.step, crossed.lr), (3, 1e6));

    let report = EpochReport {
        epoch: 1,
        test_loss: f32::INFINITY,
        correct: 0,
        total: 10,
        confusion: Box::new([[0; 10]; 10]),
    };
    let back = reply_crosses::<Evaluate>(Reply::Answer(report.clone())).await;
    assert!(matches!(back, Reply::Answer(ref r) if *r == report));

    let mut by_digit = [0.1; 10];
    by_digit[..3].copy_from_slice(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY]);
    let Reply::Answer(crossed) =
        reply_crosses::<Predict>(Reply::Answer(Probabilities { by_digit })).await
    else {
        panic!("probabilities became another reply");
    };
    assert!(crossed.by_digit[0].is_nan());
    assert_eq!(crossed.by_digit[1..], by_digit[1..]);
}

#[wasm_bindgen_test]
fn an_unreadable_message_names_its_request() {
    let value = js_sys::Object::new();
    for (key, field) in [
        ("id", wasm_bindgen::JsValue::from(9)),
        ("message", r#"{"Answer":{"epoch":"one"}}"#.into()),
        ("payloads", js_sys::Array::new().into()),
    ] {
        js_sys::Reflect::set(&value, &key.into(), &field).unwrap();
    }
    let envelope = Envelope::from_js(&value).unwrap();
    assert_eq!(envelope.id, 9);
    let error = envelope
        .open::<Reply<TrainEvent, EpochReport>>()
        .unwrap_err();
    assert!(error.starts_with("a bad message"), "{error}");
    let error = Envelope::from_js(&js_sys::Object::new().into()).unwrap_err();
    assert_eq!(error.id, None);
}
