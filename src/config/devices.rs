//! Which devices a run trains on: `auto` (one, as the backend chooses), `all` (every hardware
//! GPU), or a list such as `gpu:0,gpu:1` or `cpu,gpu`. Each device of a list takes its shard
//! of every batch; the first holds the model and steps the optimizer.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::ConfigError;

/// Devices in one process: a machine with more is rare, and each takes a thread.
pub const MAX_DEVICES: usize = 64;

/// One device of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceName {
    /// burn's `flex` CPU backend.
    Cpu,
    /// A GPU through wgpu: the one `--backend gpu` picks, or the adapter at an index of
    /// `webtrain devices`'s list.
    Gpu(Option<usize>),
}

/// The devices a run asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum DeviceList {
    /// One device, chosen by the backend setting.
    #[default]
    Auto,
    /// Every hardware GPU there is.
    All,
    /// These, in order; the same name twice makes two replicas on one device.
    Named(Vec<DeviceName>),
}

impl DeviceList {
    /// How many devices the list names, where it names them.
    pub fn named_len(&self) -> Option<usize> {
        match self {
            Self::Named(names) => Some(names.len()),
            _ => None,
        }
    }
}

impl fmt::Display for DeviceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cpu => f.write_str("cpu"),
            Self::Gpu(None) => f.write_str("gpu"),
            Self::Gpu(Some(index)) => write!(f, "gpu:{index}"),
        }
    }
}

impl FromStr for DeviceName {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let unknown = || ConfigError::Unknown {
            name: "device",
            value: s.to_string(),
            expected: &["cpu", "gpu", "gpu:N"],
        };
        match s.trim() {
            "cpu" => Ok(Self::Cpu),
            "gpu" => Ok(Self::Gpu(None)),
            other => {
                let index = other.strip_prefix("gpu:").ok_or_else(unknown)?;
                index
                    .parse()
                    .map(|i| Self::Gpu(Some(i)))
                    .map_err(|_| unknown())
            }
        }
    }
}

impl fmt::Display for DeviceList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::All => f.write_str("all"),
            Self::Named(names) => {
                let names: Vec<String> = names.iter().map(ToString::to_string).collect();
                f.write_str(&names.join(","))
            }
        }
    }
}

impl FromStr for DeviceList {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "auto" | "" => Ok(Self::Auto),
            "all" => Ok(Self::All),
            list => {
                let names = list
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<Vec<_>, _>>()?;
                match names.len() <= MAX_DEVICES {
                    true => Ok(Self::Named(names)),
                    false => Err(ConfigError::TooLarge {
                        name: "the number of devices",
                        max: MAX_DEVICES,
                        value: names.len(),
                    }),
                }
            }
        }
    }
}

/// Written as the CLI and links spell it, so records and checkpoints read as the user wrote it.
impl Serialize for DeviceList {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DeviceList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_read_and_write_back() {
        for text in [
            "auto",
            "all",
            "cpu",
            "gpu",
            "gpu:0,gpu:1",
            "cpu,gpu",
            "cpu,cpu",
        ] {
            let list: DeviceList = text.parse().unwrap();
            assert_eq!(list.to_string(), text);
        }
        assert_eq!(
            "cpu, gpu:3".parse::<DeviceList>().unwrap(),
            DeviceList::Named(vec![DeviceName::Cpu, DeviceName::Gpu(Some(3))])
        );
    }

    #[test]
    fn other_words_are_refused_by_name() {
        for bad in ["tpu", "gpu:", "gpu:-1", "gpu:x", "cpu,,gpu", "gpus"] {
            let error = bad.parse::<DeviceList>().unwrap_err().to_string();
            assert!(
                error.contains("expected cpu, gpu or gpu:N"),
                "{bad}: {error}"
            );
        }
        let many = vec!["cpu"; MAX_DEVICES + 1].join(",");
        assert!(many.parse::<DeviceList>().is_err());
    }
}
