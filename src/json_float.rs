//! Floats that may be NaN or infinite, through serde: JSON has no number for them, and
//! serde_json writes them as `null` and then refuses that `null` for an `f32`. A loss that
//! diverged, or the output of weights that hold a NaN, would make a message or a metrics.json
//! unreadable. Finite values stay numbers; the others are written as "NaN", "inf" or "-inf",
//! and `null` (as earlier metrics.json files have it) reads back as NaN.
//!
//! Use with `#[serde(with = "crate::json_float")]` on an `f32`, or the `option`, `array` and
//! `vec` submodules on an `Option<f32>`, a `[f32; N]` and a `Vec<f32>`.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An `f32` as it is written.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Written {
    Number(f32),
    Text(String),
    Null(()),
}

impl From<f32> for Written {
    fn from(value: f32) -> Self {
        match value {
            v if v.is_finite() => Written::Number(v),
            v if v.is_nan() => Written::Text("NaN".into()),
            v if v > 0.0 => Written::Text("inf".into()),
            _ => Written::Text("-inf".into()),
        }
    }
}

impl Written {
    fn value<E: serde::de::Error>(self) -> Result<f32, E> {
        match self {
            Written::Number(v) => Ok(v),
            Written::Null(()) => Ok(f32::NAN),
            Written::Text(text) => match text.as_str() {
                "NaN" => Ok(f32::NAN),
                "inf" => Ok(f32::INFINITY),
                "-inf" => Ok(f32::NEG_INFINITY),
                other => Err(E::custom(format!("'{other}' is not a number"))),
            },
        }
    }
}

pub fn serialize<S: Serializer>(value: &f32, serializer: S) -> Result<S::Ok, S::Error> {
    Written::from(*value).serialize(serializer)
}

pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f32, D::Error> {
    Written::deserialize(deserializer)?.value()
}

pub mod option {
    use super::*;

    pub fn serialize<S: Serializer>(value: &Option<f32>, serializer: S) -> Result<S::Ok, S::Error> {
        value.map(Written::from).serialize(serializer)
    }

    /// `null` is `None` here: an absent value, as it always was.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<f32>, D::Error> {
        Option::<Written>::deserialize(deserializer)?
            .map(Written::value)
            .transpose()
    }
}

pub mod array {
    use super::*;

    pub fn serialize<S: Serializer, const N: usize>(
        values: &[f32; N],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(values.iter().map(|&v| Written::from(v)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>, const N: usize>(
        deserializer: D,
    ) -> Result<[f32; N], D::Error> {
        let written = Vec::<Written>::deserialize(deserializer)?;
        let found = written.len();
        let values = written
            .into_iter()
            .map(Written::value)
            .collect::<Result<Vec<f32>, D::Error>>()?;
        values
            .try_into()
            .map_err(|_| D::Error::custom(format!("{found} values where {N} were expected")))
    }
}

pub mod vec {
    use super::*;

    pub fn serialize<S: Serializer>(values: &[f32], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(values.iter().map(|&v| Written::from(v)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<f32>, D::Error> {
        let written = Vec::<Written>::deserialize(deserializer)?;
        written.into_iter().map(Written::value).collect()
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Serialize, Deserialize)]
    struct Floats {
        #[serde(with = "crate::json_float")]
        one: f32,
        #[serde(with = "crate::json_float::option")]
        maybe: Option<f32>,
        #[serde(with = "crate::json_float::array")]
        three: [f32; 3],
    }

    fn round_trip(floats: &Floats) -> (String, Floats) {
        let json = serde_json::to_string(floats).unwrap();
        let back = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json}: {e}"));
        (json, back)
    }

    fn same(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    #[test]
    fn non_finite_values_survive_json() {
        for value in [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.25,
            -0.0,
            f32::MAX,
        ] {
            let floats = Floats {
                one: value,
                maybe: Some(value),
                three: [value, 1.5, value],
            };
            let (json, back) = round_trip(&floats);
            assert!(same(back.one, value), "{json}");
            assert!(same(back.maybe.unwrap(), value), "{json}");
            assert!(
                back.three
                    .iter()
                    .zip(floats.three)
                    .all(|(&a, b)| same(a, b)),
                "{json}"
            );
        }
        let (json, back) = round_trip(&Floats {
            one: 2.0,
            maybe: None,
            three: [1.0; 3],
        });
        assert_eq!(json, r#"{"one":2.0,"maybe":null,"three":[1.0,1.0,1.0]}"#);
        assert_eq!(back.maybe, None);
    }

    #[test]
    fn earlier_nulls_read_as_nan_and_other_text_is_refused() {
        let back: Floats =
            serde_json::from_str(r#"{"one":null,"maybe":"inf","three":[null,"-inf",3]}"#).unwrap();
        assert!(back.one.is_nan() && back.three[0].is_nan());
        assert_eq!(
            (back.maybe, back.three[1]),
            (Some(f32::INFINITY), f32::NEG_INFINITY)
        );
        let error =
            serde_json::from_str::<Floats>(r#"{"one":"fast","maybe":null,"three":[1,2,3]}"#)
                .unwrap_err();
        assert!(
            error.to_string().contains("'fast' is not a number"),
            "{error}"
        );
        assert!(serde_json::from_str::<Floats>(r#"{"one":1,"maybe":null,"three":[1,2]}"#).is_err());
    }
}
