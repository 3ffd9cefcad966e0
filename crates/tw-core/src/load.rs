//! Loading tool specs from JSON, TOML or YAML text, with errors that name the file, line, column and
//! field. The caller reads the file; this module only parses, so it stays free of I/O.
//!
//! A file holds one spec, or several under a top-level `tools` list. Every check on a spec runs
//! inside deserialization, so serde's position tracking (plus `serde_path_to_error` for the field
//! path) locates semantic errors such as an invalid schema just as it locates syntax errors.

use std::fmt;

use serde::Deserialize;

use crate::definition::ToolSpec;

/// The text formats a definition file may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefinitionFormat {
    /// `.json`
    Json,
    /// `.toml`
    Toml,
    /// `.yaml` or `.yml`
    Yaml,
}

impl DefinitionFormat {
    /// The format implied by a file name's extension.
    pub fn from_path(path: &str) -> Option<Self> {
        let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
        match ext.as_str() {
            "json" => Some(Self::Json),
            "toml" => Some(Self::Toml),
            "yaml" | "yml" => Some(Self::Yaml),
            _ => None,
        }
    }
}

/// A definition file that could not be loaded, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct LoadError {
    /// The file, as given.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// Dotted path of the field at fault (`tools[1].parameters`), when known.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ManyDoc {
    tools: Vec<ToolSpec>,
}

/// Converts a byte offset into a 1-based (line, column) pair.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..floor_char_boundary(text, offset.min(text.len()))];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rfind('\n')
        .map_or(before.chars().count(), |i| before[i + 1..].chars().count())
        + 1;
    (line, col)
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn field(path: &serde_path_to_error::Path) -> Option<String> {
    let p = path.to_string();
    // `.` is the whole document and `?` a place serde could not name: neither says anything.
    (p != "." && p != "?").then_some(p)
}

/// A parser's message without the positions it wrote into it (`... at line 3 column 1, while
/// parsing a flow node at line 1 column 7`): the error carries the position, computed on the
/// file's own lines, and libyaml's lines can differ from those.
pub(crate) fn without_positions(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find(" at line ") {
        let after = &rest[at + " at line ".len()..];
        let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let line_end = digits(after);
        let tail = after[line_end..].strip_prefix(" column ");
        match tail {
            Some(tail) if line_end > 0 && digits(tail) > 0 => {
                out.push_str(&rest[..at]);
                rest = &tail[digits(tail)..];
            }
            _ => {
                out.push_str(&rest[..at + 1]);
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Parses the specs in `text`. `file` is only used in error messages. A file must define at
/// least one tool: an empty `tools` list (or one whose entries are all commented out) is an
/// error, not a file that quietly adds nothing.
pub fn load_tool_specs(
    text: &str,
    file: &str,
    format: DefinitionFormat,
) -> Result<Vec<ToolSpec>, LoadError> {
    let specs = read_tool_specs(text, file, format)?;
    if specs.is_empty() {
        return Err(LoadError {
            file: file.to_owned(),
            line: None,
            column: None,
            field: Some("tools".to_owned()),
            message: "the file defines no tools: `tools` is empty".to_owned(),
        });
    }
    Ok(specs)
}

fn read_tool_specs(
    text: &str,
    file: &str,
    format: DefinitionFormat,
) -> Result<Vec<ToolSpec>, LoadError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let err = |line, column, field, message: String| LoadError {
        file: file.to_owned(),
        line,
        column,
        field,
        message,
    };
    if text.trim().is_empty() {
        return Err(err(None, None, None, "the file is empty".to_owned()));
    }
    let many = has_tools_key(text, format);
    match format {
        DefinitionFormat::Json => {
            let run = |de: &mut serde_json::Deserializer<serde_json::de::StrRead<'_>>| {
                if many {
                    serde_path_to_error::deserialize::<_, ManyDoc>(de).map(|m| m.tools)
                } else {
                    serde_path_to_error::deserialize::<_, ToolSpec>(de).map(|s| vec![s])
                }
            };
            let mut de = serde_json::Deserializer::from_str(text);
            let specs = run(&mut de).map_err(|e| {
                let inner = e.inner();
                let msg = without_positions(&inner.to_string());
                // serde_json says line 0 for a check that ran after the value was read (a
                // spec's `allowed_modes`, `permissions`, `command`): no position, not 0:0.
                let (line, column) = (inner.line() > 0)
                    .then(|| (inner.line(), inner.column()))
                    .unzip();
                err(line, column, field(e.path()), msg)
            })?;
            de.end().map_err(|e| {
                err(
                    Some(e.line()),
                    Some(e.column()),
                    None,
                    "trailing characters after the document".to_owned(),
                )
            })?;
            Ok(specs)
        }
        DefinitionFormat::Toml => {
            let de = toml::de::Deserializer::parse(text).map_err(|e| {
                let (line, col) = e.span().map(|s| line_col(text, s.start)).unzip();
                err(line, col, None, e.message().trim().to_owned())
            })?;
            let result = if many {
                serde_path_to_error::deserialize::<_, ManyDoc>(de).map(|m| m.tools)
            } else {
                serde_path_to_error::deserialize::<_, ToolSpec>(de).map(|s| vec![s])
            };
            result.map_err(|e| {
                let inner = e.inner();
                let (line, col) = inner.span().map(|s| line_col(text, s.start)).unzip();
                err(
                    line,
                    col,
                    field(e.path()),
                    inner.message().trim().to_owned(),
                )
            })
        }
        DefinitionFormat::Yaml => {
            let de = serde_yaml_ng::Deserializer::from_str(text);
            let result = if many {
                serde_path_to_error::deserialize::<_, ManyDoc>(de).map(|m| m.tools)
            } else {
                serde_path_to_error::deserialize::<_, ToolSpec>(de).map(|s| vec![s])
            };
            result.map_err(|e| {
                let inner = e.inner();
                // libyaml also breaks lines at a lone `\r` (and U+0085, U+2028, U+2029) and puts
                // the end of the stream on a line of its own, so its line and column can name a
                // line the file does not have; its byte index is exact, so the position is taken
                // from that, as for TOML.
                let (line, col) = inner.location().map(|l| line_col(text, l.index())).unzip();
                let msg = without_positions(&inner.to_string());
                let mut msg = msg.as_str();
                let field = field(e.path());
                // serde_yaml_ng prefixes its own copy of the path; we report the path separately.
                if let Some(f) = &field {
                    msg = msg.strip_prefix(&format!("{f}: ")).unwrap_or(msg);
                }
                err(line, col, field, msg.to_owned())
            })
        }
    }
}

/// Whether the document's top level is `{tools: [...]}`. A document that does not parse at all is
/// treated as a single spec, so the real deserializer reports the syntax error with its position.
fn has_tools_key(text: &str, format: DefinitionFormat) -> bool {
    #[derive(Deserialize)]
    struct Probe {
        #[serde(default)]
        tools: Option<serde::de::IgnoredAny>,
    }
    let probe: Option<Probe> = match format {
        DefinitionFormat::Json => serde_json::from_str(text).ok(),
        DefinitionFormat::Toml => toml::from_str(text).ok(),
        DefinitionFormat::Yaml => serde_yaml_ng::from_str(text).ok(),
    };
    probe.is_some_and(|p| p.tools.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn check(text: &str, file: &str, expect: Result<Vec<&str>, &str>) {
        let format = DefinitionFormat::from_path(file).unwrap();
        let got = load_tool_specs(text, file, format)
            .map(|specs| {
                specs
                    .iter()
                    .map(|s| s.definition.name.to_string())
                    .collect::<Vec<_>>()
            })
            .map_err(|e| e.to_string());
        assert_eq!(
            got,
            expect
                .map(|v| v.into_iter().map(str::to_owned).collect())
                .map_err(str::to_owned)
        );
    }

    const TOML_OK: &str = r#"
name = "word_count"
description = "Count words in a file"
category = "file_system"

[parameters]
type = "object"
required = ["path"]
properties.path = { type = "string" }

[command]
argv = ["wc", "-w", "--", "{path}"]
"#;

    #[test]
    fn loads_each_format() {
        check(TOML_OK, "wc.toml", Ok(vec!["word_count"]));
        check(
            r#"{"tools": [
                {"name": "a", "description": "A", "category": "system"},
                {"name": "b", "description": "B", "category": "system", "parameters": []}
            ]}"#,
            "two.json",
            Ok(vec!["a", "b"]),
        );
        check(
            "name: y\ndescription: Y\ncategory: knowledge\nparameters:\n  - name: q\n    type: string\n    required: true\n",
            "y.yaml",
            Ok(vec!["y"]),
        );
    }

    #[test]
    fn errors_name_file_line_and_field() {
        check(
            "name = \"ok\"\ndescription = \"d\"\ncategory = \"system\"\nrisk_level = \"extreme\"\n",
            "t.toml",
            Err(
                "t.toml:4:14: risk_level: unknown risk level \"extreme\": expected one of low, medium, high",
            ),
        );
        check(
            "{\"name\": \"ok\", \"description\": \"d\", \"category\": \"system\",\n \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": 5}}}}",
            "t.json",
            Err(
                "t.json:2:67: parameters: invalid JSON Schema: at /properties/a/type: 5 is not valid under any of the schemas listed in the 'anyOf' keyword",
            ),
        );
        check(
            "{\"tools\": [{\"name\": \"ok\", \"description\": \"d\", \"category\": \"system\"},\n {\"name\": \"Bad\", \"description\": \"d\", \"category\": \"system\"}]}",
            "t.json",
            Err(
                "t.json:2:15: tools[1].name: invalid tool name \"Bad\": must start with a lowercase letter",
            ),
        );
        check(
            "name: ok\ndescription: d\ncategory: system\nparameters:\n  - name: q\n    type: str\n",
            "t.yml",
            Err(
                "t.yml:5:3: parameters: [0]: unknown variant `str`, expected one of `string`, `integer`, `number`, `boolean`, `array`, `object`",
            ),
        );
        check(
            "name = \"x\"\ndescription = ",
            "t.toml",
            Err("t.toml:2:15: string values must be quoted, expected literal string"),
        );
        check("  \n", "t.json", Err("t.json: the file is empty"));
    }

    /// Found by fuzzing (`fuzz/corpus/tool_defs/yaml-error-at-end-without-newline.json`): libyaml
    /// reported the end of a file without a final newline, and any line after a lone `\r`, on
    /// lines the file does not have.
    #[test]
    fn yaml_error_positions_are_lines_of_the_file() {
        check(
            "{\"name\": \"echo\",#c",
            "t.yaml",
            Err("t.yaml:1:19: did not find expected node content, while parsing a flow node"),
        );
        check(
            "name: x\rdescription: [d\rcategory: system",
            "t.yml",
            Err("t.yml:1:22: description: invalid type: sequence, expected a string"),
        );
        check(
            "name: ok\ndescription: é\ncategory: system\nparameters: [{name: q, type: string}\n",
            "t.yaml",
            Err(
                "t.yaml:5:1: parameters: did not find expected ',' or ']', while parsing a flow sequence",
            ),
        );
    }

    /// Found by fuzzing (`fuzz/corpus/tool_defs/json-check-after-read-at-line-0.json`): a spec
    /// refused by a check made after it was read was reported at `t.json:0:0`.
    #[test]
    fn json_errors_without_a_position_name_no_line() {
        check(
            "{\"name\": \"ok\", \"description\": \"d\", \"category\": \"system\",\n \"allowed_modes\": []}",
            "t.json",
            Err(
                "t.json: allowed_modes is empty, so the tool could never run; omit it to allow every mode",
            ),
        );
    }

    /// Found by a 10-minute fuzzing run: YAML reads `#` as a comment even inside a flow list,
    /// so a file whose only tool is "commented out" loaded as no tools at all, silently.
    #[test]
    fn a_file_defining_no_tools_is_refused_in_every_format() {
        for (text, file) in [
            ("{\"tools\": []}", "t.json"),
            ("tools = []\n", "t.toml"),
            ("tools: []\n", "t.yaml"),
            (
                "{\"tools\": [\n  #  {\"name\": \"a\", \"description\": \"d\"}\n]}",
                "t.yaml",
            ),
        ] {
            let want = format!("{file}: tools: the file defines no tools: `tools` is empty");
            check(text, file, Err(&want));
        }
    }

    #[test]
    fn line_col_counts_characters() {
        assert_eq!(line_col("ab\ncé\nx", 0), (1, 1));
        assert_eq!(line_col("ab\ncé\nx", 3), (2, 1));
        assert_eq!(line_col("ab\ncé\nx", 7), (3, 1));
        assert_eq!(line_col("ab\ncé\nx", 100), (3, 2));
    }
}
