//! A message as it travels, whatever carries it: an [`Envelope`] holds the id of the request it
//! belongs to, the message as JSON, and its [`Payload`]s (weights, images, IDX files) beside the
//! JSON rather than in it. The worker posts it as a JS object whose payloads are transferred
//! (src/worker/transport.rs); a WebSocket carries it as one binary message
//! ([`Envelope::to_bytes`]).

use std::cell::{Ref, RefCell};

use serde::de::{DeserializeOwned, Error as _};
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::data::MAX_IDX_BYTES;

/// Bytes a message names as one of its fields, carried beside its JSON: the worker transfers
/// them without a copy and the WebSocket frames them raw, where JSON would spell each byte out.
/// In the JSON a payload is its index among the envelope's payloads. Sealing a message moves
/// its payloads into the envelope rather than copying them (MNIST's files are 55 MB): a message
/// is sealed once, and is not read after.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Payload(RefCell<Vec<u8>>);

impl Payload {
    pub fn bytes(&self) -> Ref<'_, [u8]> {
        Ref::map(self.0.borrow(), Vec::as_slice)
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.0.into_inner()
    }
}

impl From<Vec<u8>> for Payload {
    fn from(bytes: Vec<u8>) -> Self {
        Self(RefCell::new(bytes))
    }
}

thread_local! {
    /// The payloads of the message being sealed or opened on this thread.
    static PAYLOADS: RefCell<Option<Vec<Option<Vec<u8>>>>> = const { RefCell::new(None) };
}

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let index = PAYLOADS.with_borrow_mut(|payloads| {
            let payloads = payloads.as_mut()?;
            payloads.push(Some(self.0.take()));
            Some(payloads.len() - 1)
        });
        match index {
            Some(index) => serializer.serialize_u64(index as u64),
            None => Err(S::Error::custom("a payload outside an envelope")),
        }
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let index = usize::deserialize(deserializer)?;
        PAYLOADS
            .with_borrow_mut(|payloads| payloads.as_mut()?.get_mut(index)?.take())
            .map(Payload::from)
            .ok_or_else(|| D::Error::custom(format!("no payload {index}")))
    }
}

/// Runs `f` with `payloads` as the message's, and gives back those left.
fn with_payloads<T>(payloads: Vec<Option<Vec<u8>>>, f: impl FnOnce() -> T) -> (T, Vec<Vec<u8>>) {
    let outer = PAYLOADS.replace(Some(payloads));
    let result = f();
    let left = PAYLOADS.replace(outer).unwrap_or_default();
    (result, left.into_iter().flatten().collect())
}

/// A message sealed for the trip: the request it belongs to, its JSON and its payloads.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    pub id: u32,
    pub json: String,
    pub payloads: Vec<Vec<u8>>,
}

/// A message that could not be read; the request it belongs to, when that much could be.
#[derive(Debug)]
pub struct BadMessage {
    pub id: Option<u32>,
    pub reason: String,
}

/// The largest message an engine reads: MNIST's four files at their largest, and the rest.
pub const MAX_MESSAGE_BYTES: usize = 4 * MAX_IDX_BYTES as usize + (1 << 20);

impl Envelope {
    /// `message`, for request `id`, its payloads moved out of it and beside its JSON.
    pub fn seal<T: Serialize>(id: u32, message: T) -> Result<Self, String> {
        let (json, payloads) = with_payloads(Vec::new(), || serde_json::to_string(&message));
        Ok(Self {
            id,
            json: json.map_err(|e| e.to_string())?,
            payloads,
        })
    }

    /// The message, each payload put back where its JSON names it.
    pub fn open<T: DeserializeOwned>(self) -> Result<T, String> {
        let payloads = self.payloads.into_iter().map(Some).collect();
        let (message, _) = with_payloads(payloads, || serde_json::from_str(&self.json));
        message.map_err(|e| format!("a bad message: {e}"))
    }

    /// Bytes a WebSocket carries: the id, the JSON and each payload, each of the last three
    /// after its length, all little-endian `u32`s.
    pub fn to_bytes(&self) -> Result<Vec<u8>, String> {
        let total = 12 + self.json.len() + self.payloads.iter().map(|p| 4 + p.len()).sum::<usize>();
        if total > MAX_MESSAGE_BYTES {
            return Err(format!("a message of {total} bytes, too large to send"));
        }
        let mut bytes = Vec::with_capacity(total);
        bytes.extend(self.id.to_le_bytes());
        bytes.extend((self.json.len() as u32).to_le_bytes());
        bytes.extend(self.json.as_bytes());
        bytes.extend((self.payloads.len() as u32).to_le_bytes());
        for payload in &self.payloads {
            bytes.extend((payload.len() as u32).to_le_bytes());
            bytes.extend(payload);
        }
        Ok(bytes)
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, BadMessage> {
        let mut reader = Reader { bytes, at: 0 };
        let id = reader.u32().ok_or(BadMessage {
            id: None,
            reason: "a message without an id".into(),
        })?;
        let bad = |reason: &str| BadMessage {
            id: Some(id),
            reason: reason.to_string(),
        };
        let json = reader
            .part()
            .ok_or_else(|| bad("a message whose body is cut short"))?;
        let json = std::str::from_utf8(json)
            .map_err(|_| bad("a message whose body is not text"))?
            .to_string();
        let count = reader
            .u32()
            .ok_or_else(|| bad("a message without payloads"))?;
        let mut payloads = Vec::new();
        for _ in 0..count {
            let part = reader
                .part()
                .ok_or_else(|| bad("a message whose payloads are cut short"))?;
            payloads.push(part.to_vec());
        }
        if reader.at != bytes.len() {
            return Err(bad("a message with bytes after its payloads"));
        }
        Ok(Self { id, json, payloads })
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let part = self.bytes.get(self.at..self.at.checked_add(len)?)?;
        self.at += len;
        Some(part)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn part(&mut self) -> Option<&'a [u8]> {
        let len = self.u32()? as usize;
        self.take(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Files {
        names: Vec<String>,
        first: Payload,
        rest: Vec<Payload>,
        #[serde(with = "crate::json_float")]
        loss: f32,
    }

    fn files() -> Files {
        Files {
            names: vec!["a".into(), "b".into()],
            first: vec![1, 2, 3].into(),
            rest: vec![Vec::new().into(), vec![9; 1000].into()],
            loss: f32::NAN,
        }
    }

    #[test]
    fn a_message_crosses_as_bytes_its_payloads_beside_its_json() {
        let sent = Envelope::seal(9, files()).unwrap();
        assert_eq!(sent.payloads.len(), 3);
        assert!(sent.json.len() < 100, "{}", sent.json);
        let crossed = Envelope::from_bytes(&sent.to_bytes().unwrap()).unwrap();
        assert_eq!(crossed, sent);
        let back: Files = crossed.open().unwrap();
        assert!(back.loss.is_nan());
        assert_eq!(back.first, files().first);
        assert_eq!(back.rest, files().rest);
    }

    #[test]
    fn a_payload_named_twice_or_missing_is_refused() {
        let mut envelope = Envelope::seal(1, files()).unwrap();
        envelope.json = envelope.json.replace("\"rest\":[1,2]", "\"rest\":[1,1]");
        assert!(
            envelope
                .clone()
                .open::<Files>()
                .unwrap_err()
                .contains("no payload 1")
        );
        envelope.payloads.truncate(1);
        assert!(envelope.open::<Files>().is_err());
        // Outside an envelope a payload has nowhere to go.
        assert!(serde_json::to_string(&Payload::from(vec![1])).is_err());
    }

    #[test]
    fn cut_or_padded_bytes_are_refused_with_the_id_when_it_can_be_read() {
        let bytes = Envelope::seal(5, files()).unwrap().to_bytes().unwrap();
        for len in 0..bytes.len() {
            let refused = Envelope::from_bytes(&bytes[..len]).unwrap_err();
            assert_eq!(refused.id, (len >= 4).then_some(5), "cut at {len}");
        }
        let mut padded = bytes.clone();
        padded.push(0);
        assert!(Envelope::from_bytes(&padded).is_err());
        // A length beyond the end is refused, not allocated.
        let mut huge = 5u32.to_le_bytes().to_vec();
        huge.extend(u32::MAX.to_le_bytes());
        assert_eq!(Envelope::from_bytes(&huge).unwrap_err().id, Some(5));
    }
}
