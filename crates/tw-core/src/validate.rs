//! Argument and output validation through a bounded cache of compiled validators.
//!
//! Compiling every registered schema eagerly would cost about 41 KiB per tool (400 MiB at 10,000
//! tools), so validators are compiled on first use and kept in a size-bounded, sharded cache
//! (quick_cache: CLOCK-Pro eviction, lock-light reads). Concurrent first uses of one schema compile it
//! once. The fast path asks `is_valid` (no error allocation); only an invalid instance pays for
//! collecting every violation.

use std::sync::Arc;

use serde_json::Value;

use crate::schema::{ParameterSchema, SchemaError, Violation, collect};

/// Default number of compiled validators kept (about 41 MiB at the measured 41 KiB each).
pub const DEFAULT_CAPACITY: usize = 1024;

/// A bounded cache of compiled validators keyed by [`ParameterSchema::id`].
pub struct ValidatorCache {
    cache: quick_cache::sync::Cache<u64, Arc<jsonschema::Validator>>,
}

impl Default for ValidatorCache {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY)
    }
}

impl ValidatorCache {
    /// A cache holding about `capacity` compiled validators.
    pub fn new(capacity: usize) -> Self {
        Self {
            cache: quick_cache::sync::Cache::new(capacity.max(1)),
        }
    }

    /// The compiled validator for `schema`, compiling it if it is not cached.
    pub fn validator(
        &self,
        schema: &ParameterSchema,
    ) -> Result<Arc<jsonschema::Validator>, SchemaError> {
        self.cache
            .get_or_insert_with(&schema.id(), || schema.compile().map(Arc::new))
    }

    /// Validates `instance` against `schema`. `Ok(Ok(()))` when valid, `Ok(Err(violations))` with
    /// every violation when not, `Err` when the schema itself cannot be compiled.
    pub fn validate(
        &self,
        schema: &ParameterSchema,
        instance: &Value,
    ) -> Result<Result<(), Vec<Violation>>, SchemaError> {
        let validator = self.validator(schema)?;
        if validator.is_valid(instance) {
            return Ok(Ok(()));
        }
        Ok(Err(collect(validator.iter_errors(instance))))
    }

    /// Number of validators currently held.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// Whether no validator is held.
    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn schema() -> ParameterSchema {
        ParameterSchema::parameters(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1},
                "limit": {"type": "integer", "minimum": 1},
                "mode": {"enum": ["a", "b"]}
            },
            "required": ["path"],
            "additionalProperties": false
        }))
        .unwrap()
    }

    fn check(instance: Value, expect: &[(&str, &str)]) {
        let cache = ValidatorCache::new(4);
        let got = match cache.validate(&schema(), &instance).unwrap() {
            Ok(()) => vec![],
            Err(v) => v.into_iter().map(|v| (v.pointer, v.keyword)).collect(),
        };
        let expect: Vec<(String, String)> = expect
            .iter()
            .map(|(p, k)| ((*p).to_owned(), (*k).to_owned()))
            .collect();
        assert_eq!(got, expect);
    }

    #[test]
    fn valid_instance_has_no_violations() {
        check(json!({"path": "a", "limit": 3, "mode": "b"}), &[]);
    }

    #[test]
    fn every_violation_is_reported_with_its_pointer() {
        check(
            json!({"path": "", "limit": 0, "mode": "c", "extra": true}),
            &[
                ("/path", "minLength"),
                ("/limit", "minimum"),
                ("/mode", "enum"),
                ("", "additionalProperties"),
            ],
        );
        check(json!({}), &[("", "required")]);
        check(json!("not an object"), &[("", "type")]);
    }

    #[test]
    fn cache_is_bounded_and_keyed_by_schema_identity() {
        let cache = ValidatorCache::new(2);
        let schemas: Vec<_> = (0..10).map(|_| schema()).collect();
        for s in &schemas {
            assert!(cache.validate(s, &json!({"path": "x"})).unwrap().is_ok());
        }
        assert!(cache.len() <= 2, "cache holds {}", cache.len());
    }
}
