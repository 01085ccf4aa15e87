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
use webtrain::train::{EpochReport, TrainEvent};
use webtrain::worker::protocol::{Envelope, Reply, Request};

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
    (Envelope::from_js(&event.data()).unwrap(), sent)
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
        message: Reply::Trained(webtrain::train::Outcome::Completed),
        payloads: vec![weights.clone(), Vec::new()],
    })
    .await;
    assert_eq!(back.payloads, vec![weights, Vec::new()]);
    assert!(matches!(back.message, Reply::Trained(_)));
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
