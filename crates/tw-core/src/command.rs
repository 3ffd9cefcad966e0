//! Command templates for custom tools: an argv list whose `{placeholders}` are filled from the
//! validated arguments.
//!
//! The safety rule is structural: every argv element stays exactly one element, whatever the
//! argument contains, and nothing is ever passed through a shell. The program (`argv[0]`) is fixed by
//! whoever defined the tool and may not contain placeholders, so an agent can choose values but
//! never which binary runs. Values are still passed to the program as given, so a tool whose program
//! parses options should put `--` before positional placeholders or constrain them with a `pattern`.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::error::CoreError;
use crate::schema::ParameterSchema;

/// How a custom tool's standard output becomes its result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    /// Standard output is the result, as text.
    #[default]
    Text,
    /// Standard output must be one JSON document, which is the result.
    Json,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Placeholder(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Element {
    raw: String,
    segments: Vec<Segment>,
}

impl Element {
    fn parse(raw: &str) -> Result<Self, String> {
        let mut segments = Vec::new();
        let mut literal = String::new();
        let mut chars = raw.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    literal.push('}');
                }
                '{' => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(c) if c.is_ascii_alphanumeric() || c == '_' || c == '-' => {
                                name.push(c)
                            }
                            Some(c) => {
                                return Err(format!(
                                    "{c:?} is not allowed in a placeholder name (write {{{{ for a literal brace)"
                                ));
                            }
                            None => return Err("unclosed placeholder".to_owned()),
                        }
                    }
                    if name.is_empty() {
                        return Err("empty placeholder {}".to_owned());
                    }
                    if !literal.is_empty() {
                        segments.push(Segment::Literal(std::mem::take(&mut literal)));
                    }
                    segments.push(Segment::Placeholder(name));
                }
                '}' => return Err("unmatched '}' (write }} for a literal brace)".to_owned()),
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            segments.push(Segment::Literal(literal));
        }
        Ok(Self {
            raw: raw.to_owned(),
            segments,
        })
    }

    fn placeholders(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().filter_map(|s| match s {
            Segment::Placeholder(p) => Some(p.as_str()),
            Segment::Literal(_) => None,
        })
    }
}

/// A custom tool's command line.
#[derive(Clone, PartialEq, Eq)]
pub struct CommandTemplate {
    argv: Vec<Element>,
    /// How standard output becomes the result.
    pub output: OutputFormat,
    /// Extra environment variables for the child (the rest of the environment is scrubbed).
    pub env: BTreeMap<String, String>,
}

impl fmt::Debug for CommandTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommandTemplate")
            .field("argv", &self.argv().collect::<Vec<_>>())
            .field("output", &self.output)
            .field("env", &self.env)
            .finish()
    }
}

impl CommandTemplate {
    /// Parses and checks a template.
    pub fn new(
        argv: Vec<String>,
        output: OutputFormat,
        env: BTreeMap<String, String>,
    ) -> Result<Self, CoreError> {
        let Some(program) = argv.first() else {
            return Err(CoreError::Template("argv must name a program".to_owned()));
        };
        if program.trim().is_empty() {
            return Err(CoreError::Template(
                "argv[0] must name a program".to_owned(),
            ));
        }
        let argv = argv
            .iter()
            .enumerate()
            .map(|(i, a)| {
                if a.contains('\0') {
                    return Err(CoreError::Template(format!(
                        "argv[{i}] contains a NUL byte"
                    )));
                }
                Element::parse(a).map_err(|e| CoreError::Template(format!("argv[{i}]: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if argv[0].placeholders().next().is_some() {
            return Err(CoreError::Template(
                "argv[0]: the program must be fixed; placeholders are only allowed in arguments"
                    .to_owned(),
            ));
        }
        for (k, v) in &env {
            let ok = k.bytes().enumerate().all(|(i, b)| {
                b == b'_' || b.is_ascii_alphabetic() || (i > 0 && b.is_ascii_digit())
            });
            if k.is_empty() || !ok {
                return Err(CoreError::Template(format!(
                    "env: {k:?} is not a valid variable name"
                )));
            }
            if v.contains('\0') {
                return Err(CoreError::Template(format!("env.{k} contains a NUL byte")));
            }
            // The exec layer judges the program, and every command a shell in it would run, as
            // the sandbox finds and loads it with its own environment; a template that moved
            // PATH, preloaded a library or gave a shell a start-up file would run something else.
            if let Some(why) = crate::shell::sensitive_variable(k) {
                return Err(CoreError::Template(format!(
                    "env.{k}: a custom tool cannot set it ({why}); policy judges programs as the \
                     sandbox finds them, so name the program by its absolute path instead"
                )));
            }
        }
        Ok(Self { argv, output, env })
    }

    /// The program to run.
    pub fn program(&self) -> &str {
        &self.argv[0].raw
    }

    /// The template elements as written.
    pub fn argv(&self) -> impl Iterator<Item = &str> {
        self.argv.iter().map(|e| e.raw.as_str())
    }

    /// Checks that every placeholder names a declared parameter.
    pub fn check_against(&self, parameters: &ParameterSchema) -> Result<(), String> {
        let declared = parameters
            .value()
            .get("properties")
            .and_then(Value::as_object);
        for (i, e) in self.argv.iter().enumerate() {
            for p in e.placeholders() {
                if !declared.is_some_and(|d| d.contains_key(p)) {
                    return Err(format!(
                        "argv[{i}]: placeholder {{{p}}} is not a declared parameter"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Fills the template from validated arguments. An element whose placeholder has no value (an
    /// omitted optional argument without a schema default, or null) is left out entirely, so write
    /// options as one element (`--limit={limit}`). Strings are inserted as-is, numbers and booleans
    /// in JSON notation, arrays and objects as compact JSON.
    pub fn render(
        &self,
        arguments: &Value,
        parameters: &ParameterSchema,
    ) -> Result<Vec<String>, CoreError> {
        let defaults = parameters
            .value()
            .get("properties")
            .and_then(Value::as_object);
        let mut out = Vec::with_capacity(self.argv.len());
        'elements: for e in &self.argv {
            let mut rendered = String::new();
            for s in &e.segments {
                match s {
                    Segment::Literal(l) => rendered.push_str(l),
                    Segment::Placeholder(p) => {
                        let value = arguments.get(p).or_else(|| {
                            defaults
                                .and_then(|d| d.get(p))
                                .and_then(|s| s.get("default"))
                        });
                        let text = match value {
                            None | Some(Value::Null) => continue 'elements,
                            Some(Value::String(s)) => s.clone(),
                            Some(other) => other.to_string(),
                        };
                        if text.contains('\0') {
                            return Err(CoreError::Template(format!(
                                "argument {p:?} contains a NUL byte"
                            )));
                        }
                        rendered.push_str(&text);
                    }
                }
            }
            out.push(rendered);
        }
        Ok(out)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandDoc {
    argv: Vec<String>,
    #[serde(default)]
    output: OutputFormat,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    env: BTreeMap<String, String>,
}

impl Serialize for CommandTemplate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        CommandDoc {
            argv: self.argv().map(str::to_owned).collect(),
            output: self.output,
            env: self.env.clone(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for CommandTemplate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Checked while the deserializer still points at the command, so YAML errors carry the
        // command's line rather than the document's.
        crate::de::checked(d, "a command: {argv = [...], output, env}", |v| {
            let doc: CommandDoc = serde_json::from_value(v).map_err(|e| e.to_string())?;
            Self::new(doc.argv, doc.output, doc.env).map_err(|e| {
                e.to_string()
                    .trim_start_matches("command template: ")
                    .to_owned()
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn params() -> ParameterSchema {
        ParameterSchema::parameters(json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "limit": {"type": "integer", "default": 10},
                "flag": {"type": "boolean"},
                "opts": {"type": "object"}
            }
        }))
        .unwrap()
    }

    fn check(argv: &[&str], args: Value, expect: Result<Vec<&str>, &str>) {
        let got = CommandTemplate::new(
            argv.iter().map(|s| (*s).to_owned()).collect(),
            OutputFormat::Text,
            BTreeMap::new(),
        )
        .and_then(|t| t.render(&args, &params()))
        .map_err(|e| e.to_string());
        assert_eq!(
            got,
            expect
                .map(|v| v.into_iter().map(str::to_owned).collect())
                .map_err(str::to_owned)
        );
    }

    #[test]
    fn each_argument_stays_one_element() {
        check(
            &["grep", "-n", "--", "{pattern}"],
            json!({"pattern": "a b; rm -rf / $(id) `x` | y"}),
            Ok(vec!["grep", "-n", "--", "a b; rm -rf / $(id) `x` | y"]),
        );
    }

    #[test]
    fn defaults_missing_values_and_literal_braces() {
        check(
            &[
                "tool",
                "--limit={limit}",
                "--flag={flag}",
                "{{x}}",
                "{opts}",
            ],
            json!({"opts": {"a": [1, 2]}}),
            Ok(vec!["tool", "--limit=10", "{x}", "{\"a\":[1,2]}"]),
        );
        check(
            &["tool", "{flag}"],
            json!({"flag": true}),
            Ok(vec!["tool", "true"]),
        );
    }

    #[test]
    fn refuses_bad_templates() {
        check(
            &[],
            json!({}),
            Err("command template: argv must name a program"),
        );
        check(
            &["{pattern}"],
            json!({}),
            Err(
                "command template: argv[0]: the program must be fixed; placeholders are only allowed in arguments",
            ),
        );
        check(
            &["a", "{x"],
            json!({}),
            Err("command template: argv[1]: unclosed placeholder"),
        );
        check(
            &["a", "x}"],
            json!({}),
            Err("command template: argv[1]: unmatched '}' (write }} for a literal brace)"),
        );
        check(
            &["a", "{pattern}"],
            json!({"pattern": "a\u{0}b"}),
            Err("command template: argument \"pattern\" contains a NUL byte"),
        );
    }

    /// The exec layer judges a custom tool's program on the sandbox's PATH: a template that
    /// moved PATH would run another file than the one judged (`git` judged as /usr/bin/git,
    /// run from a workspace directory the agent writes), and a preloaded library or a shell's
    /// start-up file would run code no rule saw.
    #[test]
    fn refuses_an_environment_that_changes_what_runs() {
        let template = |name: &str| {
            CommandTemplate::new(
                vec!["git".to_owned(), "status".to_owned()],
                OutputFormat::Text,
                BTreeMap::from([(name.to_owned(), "/workspace/bin".to_owned())]),
            )
            .map(|_| ())
            .map_err(|e| e.to_string())
        };
        for name in [
            "PATH",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "BASH_ENV",
            "ENV",
            "IFS",
        ] {
            let err = template(name).unwrap_err();
            assert!(
                err.starts_with(&format!("command template: env.{name}: a custom tool cannot set it (assignment to `{name}` changes how commands are found or run)")),
                "{err}"
            );
        }
        for name in ["TZ", "GIT_PAGER", "RUST_LOG", "PATHS"] {
            assert_eq!(template(name), Ok(()), "{name}");
        }
    }
}
