//! A serde helper that checks a value while its deserializer is still positioned on it.
//!
//! Checks that run after a value is fully read (schema validation, parameter-list conversion) would
//! otherwise report the position of the enclosing document in YAML, whose deserializer stamps a
//! position on an error only in the frame that raised it. Running the check inside our own visitor
//! keeps the error attached to the value at fault in every format.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// Deserializes a JSON-like value and runs `check` on it inside the visitor.
pub(crate) fn checked<'de, D, T, F>(d: D, expecting: &'static str, check: F) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    F: FnOnce(Value) -> Result<T, String>,
{
    d.deserialize_any(Checked {
        expecting,
        check,
        marker: PhantomData,
    })
}

struct Checked<F, T> {
    expecting: &'static str,
    check: F,
    marker: PhantomData<T>,
}

impl<F, T> Checked<F, T>
where
    F: FnOnce(Value) -> Result<T, String>,
{
    fn run<E: de::Error>(self, v: Value) -> Result<T, E> {
        (self.check)(v).map_err(E::custom)
    }
}

impl<'de, F, T> Visitor<'de> for Checked<F, T>
where
    F: FnOnce(Value) -> Result<T, String>,
{
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        let v = Value::deserialize(MapAccessDeserializer::new(map))?;
        self.run(v)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
        let v = Value::deserialize(SeqAccessDeserializer::new(seq))?;
        self.run(v)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<T, E> {
        self.run(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        self.run(Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        self.run(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        self.run(Value::from(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        self.run(Value::String(v.to_owned()))
    }

    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        self.run(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<T, E> {
        self.run(Value::Null)
    }
}
