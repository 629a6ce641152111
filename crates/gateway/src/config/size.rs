//! A size in bytes as a person writes it: `"64 MiB"`, `"512 KiB"`,
//! `"1 GiB"`, `"1000 kB"`, or a plain number of bytes.
//!
//! Layer: `config`.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A number of bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// Read `"64 MiB"` and the like: a number, optional spaces, and a unit
    /// (`B`, `kB`/`KB`, `MB`, `GB`, `KiB`, `MiB`, `GiB`; none is bytes).
    pub fn parse(text: &str) -> Result<Self, SizeError> {
        let text = text.trim();
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let (number, unit) = text.split_at(split);
        let number: f64 = number.parse().map_err(|_| SizeError(text.to_owned()))?;
        let scale: u64 = match unit.trim() {
            "" | "B" => 1,
            "kB" | "KB" | "k" | "K" => 1_000,
            "MB" | "M" => 1_000_000,
            "GB" | "G" => 1_000_000_000,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            _ => return Err(SizeError(text.to_owned())),
        };
        let bytes = number * scale as f64;
        if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
            return Err(SizeError(text.to_owned()));
        }
        Ok(Self(bytes as u64))
    }
}

/// A size that does not read as one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a size: write a number and a unit, like \"64 MiB\" or \"512 KiB\"")]
pub struct SizeError(String);

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
        for (scale, unit) in UNITS {
            if self.0 >= scale && self.0.is_multiple_of(scale) {
                return write!(f, "{} {unit}", self.0 / scale);
            }
        }
        write!(f, "{} B", self.0)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Bytes(u64),
            Text(String),
        }
        match Written::deserialize(d)? {
            Written::Bytes(n) => Ok(Self(n)),
            Written::Text(t) => Self::parse(&t).map_err(serde::de::Error::custom),
        }
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl JsonSchema for ByteSize {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ByteSize".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A size: a number of bytes, or a number and a unit (\"64 MiB\", \"512 KiB\", \"1 GiB\", \"100 MB\").",
            "anyOf": [
                { "type": "integer", "minimum": 0 },
                { "type": "string", "pattern": "^\\s*[0-9.]+\\s*(B|kB|KB|k|K|MB|M|GB|G|KiB|MiB|GiB)?\\s*$" }
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them_and_nonsense_is_named() {
        for (text, bytes) in [
            ("64 MiB", 64 << 20),
            ("64MiB", 64 << 20),
            ("512 KiB", 512 << 10),
            ("1.5 GiB", 3 << 29),
            ("100 MB", 100_000_000),
            ("42", 42),
        ] {
            assert_eq!(ByteSize::parse(text), Ok(ByteSize(bytes)), "{text}");
        }
        for bad in ["", "MiB", "12 parsecs", "-1 MiB", "1e400 GiB"] {
            let e = ByteSize::parse(bad).unwrap_err().to_string();
            assert!(e.contains("64 MiB"), "{bad}: {e}");
        }
        assert_eq!(ByteSize(64 << 20).to_string(), "64 MiB");
        let from_toml: ByteSize = toml::from_str::<toml::Value>("v = \"2 MiB\"")
            .unwrap()
            .get("v")
            .cloned()
            .unwrap()
            .try_into()
            .unwrap();
        assert_eq!(from_toml, ByteSize(2 << 20));
    }
}
