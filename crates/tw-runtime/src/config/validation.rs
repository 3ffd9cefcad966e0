//! The config's `[validation]` section: named profiles the `validate_content` tool checks text
//! and JSON against (a JSON Schema, lengths, an encoding, forbidden and required patterns; the
//! rules themselves are `tw_core::content`'s).
//!
//! Parsing stays pure like the rest of the config: patterns and an inline schema are checked
//! here, while a schema given as a file is only located (relative to the config's directory)
//! and remembered with its place in the config. [`Config::content_profiles`], which the runtime
//! calls when it opens, reads those files through the reader it is handed and compiles every
//! schema, so a missing or broken schema file also refuses to start with the config's
//! file:line:column and the profile's name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;
use tw_core::ParameterSchema;
use tw_core::content::{ContentProfile, Encoding, Pattern, TextRules};

use super::{Config, ConfigError, MAX_SHORT_NAME};

/// What `[validation]` says, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ValidationSettings {
    /// The profiles, by name.
    pub profiles: BTreeMap<String, ProfileSettings>,
}

/// One `[validation.profiles.NAME]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileSettings {
    /// The JSON Schema JSON content must satisfy, if any.
    pub schema: Option<SchemaSource>,
    /// The rules for the text.
    pub rules: TextRules,
}

/// Where a profile's schema is.
#[derive(Debug, Clone, PartialEq)]
pub enum SchemaSource {
    /// Written in the config, checked when the config was parsed.
    Inline {
        /// The schema.
        schema: ParameterSchema,
        /// Where the config writes it (a byte offset into the config's text), for errors.
        at: usize,
    },
    /// A JSON file, read and checked when the runtime opens.
    File {
        /// The file (relative paths are taken from the config's directory).
        path: PathBuf,
        /// Where the config names it (a byte offset into the config's text), for errors.
        at: usize,
    },
}

/// The validation profiles a runtime serves, by name, each compiled once.
pub type ContentProfiles = BTreeMap<String, Arc<ContentProfile>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ValidationDoc {
    #[serde(default)]
    profiles: BTreeMap<Spanned<String>, ProfileDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileDoc {
    schema: Option<Spanned<Value>>,
    min_length: Option<Spanned<u64>>,
    max_length: Option<Spanned<u64>>,
    encoding: Option<Spanned<String>>,
    #[serde(default)]
    forbid: Vec<Spanned<String>>,
    #[serde(default)]
    require: Vec<Spanned<String>>,
}

type Failure = (usize, String);

/// Checks `[validation]`.
pub(super) fn settings(
    d: ValidationDoc,
    base: &Path,
    home: Option<&Path>,
) -> Result<ValidationSettings, Failure> {
    let mut s = ValidationSettings::default();
    for (name, doc) in d.profiles {
        let n = name.get_ref();
        if !super::short_name(n) {
            return Err((
                name.span().start,
                format!(
                    "validation.profiles: {n:?} is not a profile name (1 to {MAX_SHORT_NAME} lowercase \
                     letters, digits, '_' and '-', starting with a letter)"
                ),
            ));
        }
        let profile = profile(n, name.span().start, doc, base, home)?;
        s.profiles.insert(name.into_inner(), profile);
    }
    Ok(s)
}

fn profile(
    name: &str,
    at: usize,
    d: ProfileDoc,
    base: &Path,
    home: Option<&Path>,
) -> Result<ProfileSettings, Failure> {
    let key = format!("validation.profiles.{name}");
    let mut rules = TextRules {
        min_length: d.min_length.as_ref().map(|m| *m.get_ref()),
        max_length: d.max_length.as_ref().map(|m| *m.get_ref()),
        ..TextRules::default()
    };
    if let (Some(min), Some(max)) = (&d.min_length, &d.max_length)
        && max.get_ref() < min.get_ref()
    {
        return Err((
            max.span().start,
            format!(
                "{key}: max_length {} is less than min_length {}: no text could pass",
                max.get_ref(),
                min.get_ref()
            ),
        ));
    }
    if let Some(e) = &d.encoding {
        rules.encoding = e
            .get_ref()
            .parse::<Encoding>()
            .map_err(|m| (e.span().start, format!("{key}.encoding: {m}")))?;
    }
    for (list, into, field) in [
        (&d.forbid, &mut rules.forbid, "forbid"),
        (&d.require, &mut rules.require, "require"),
    ] {
        for (i, p) in list.iter().enumerate() {
            let pattern = Pattern::new(p.get_ref()).map_err(|m| {
                (
                    p.span().start,
                    format!("{key}.{field}[{i}]: {:?}: {m}", p.get_ref()),
                )
            })?;
            into.push(pattern);
        }
    }
    let schema = match d.schema {
        None => None,
        Some(s) => {
            let at = s.span().start;
            Some(match s.into_inner() {
                Value::String(path) if !path.trim().is_empty() => SchemaSource::File {
                    path: super::expand(&path, base, home),
                    at,
                },
                Value::Object(map) => SchemaSource::Inline {
                    schema: ParameterSchema::any(Value::Object(map))
                        .map_err(|e| (at, format!("{key}.schema: {e}")))?,
                    at,
                },
                _ => {
                    return Err((
                        at,
                        format!(
                            "{key}.schema: give the path of a JSON Schema file (\"schemas/{name}.json\") \
                             or the schema as a table ({{ type = \"object\", ... }})"
                        ),
                    ));
                }
            })
        }
    };
    if schema.is_none() && rules.is_empty() {
        return Err((
            at,
            format!(
                "{key} has no rule, so every content would pass: give schema, min_length, \
                 max_length, encoding, forbid or require"
            ),
        ));
    }
    Ok(ProfileSettings { schema, rules })
}

impl Config {
    /// The validation profiles, ready to check content: each schema file read with `read` (the
    /// runtime passes `std::fs::read_to_string`) and every schema compiled. A file that cannot
    /// be read, is not JSON or is not a JSON Schema is refused with the place the config names
    /// it and the profile's name.
    pub fn content_profiles(
        &self,
        read: impl Fn(&Path) -> std::io::Result<String>,
    ) -> Result<ContentProfiles, ConfigError> {
        let file = self
            .source
            .as_ref()
            .map_or_else(|| "config".to_owned(), |p| p.display().to_string());
        let err = |at: Option<usize>, message: String| {
            let (line, column) = at.map(|o| tw_core::load::line_col(&self.text, o)).unzip();
            ConfigError {
                file: file.clone(),
                line,
                column,
                message,
            }
        };
        let mut out = ContentProfiles::new();
        for (name, p) in &self.validation.profiles {
            let key = format!("validation.profiles.{name}.schema");
            let (schema, at) = match &p.schema {
                None => (None, None),
                Some(SchemaSource::Inline { schema, at }) => (Some(schema.clone()), Some(*at)),
                Some(SchemaSource::File { path, at }) => {
                    let shown = path.display();
                    let text = read(path)
                        .map_err(|e| err(Some(*at), format!("{key}: cannot read {shown}: {e}")))?;
                    let value: Value = serde_json::from_str(&text).map_err(|e| {
                        let (why, offset) = tw_core::content::json_error(&e, &text);
                        let (line, column) = tw_core::load::line_col(&text, offset);
                        err(
                            Some(*at),
                            format!("{key}: {shown}:{line}:{column}: not JSON: {why}"),
                        )
                    })?;
                    let schema = ParameterSchema::any(value)
                        .map_err(|e| err(Some(*at), format!("{key}: {shown}: {e}")))?;
                    (Some(schema), Some(*at))
                }
            };
            let profile = ContentProfile::new(schema, p.rules.clone())
                .map_err(|e| err(at, format!("{key}: {e}")))?;
            out.insert(name.clone(), Arc::new(profile));
        }
        Ok(out)
    }
}
