//! The OpenAPI 3.1 document of the admin API, served at `GET /api/v1/openapi.json`. Written out
//! here rather than generated: the API is small, and a test sends a request to every operation
//! the document lists and fails on any the router does not serve, so the two cannot drift apart
//! silently.

use serde_json::{Value, json};

fn error_responses(codes: &[&str]) -> Value {
    let mut m = serde_json::Map::new();
    for code in codes {
        let why = match *code {
            "400" => "The request is malformed; the message names the field.",
            "401" => "No token, or one that is not valid.",
            "403" => {
                "Wrong Host or Origin, or an agent's token (the admin API takes the administrator's)."
            }
            "404" => "No such tool, skill, confirmation, grant, record or call in flight.",
            "409" => "The name is taken, or the request was already answered.",
            "422" => "The runtime refused it; the message says why, the field where.",
            "503" => {
                "Something the request needs cannot be used now (the skills directory, the store)."
            }
            _ => "The request failed.",
        };
        m.insert(
            (*code).to_owned(),
            json!({"description": why, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}),
        );
    }
    Value::Object(m)
}

fn ok(description: &str, schema: Value, errors: &[&str]) -> Value {
    let mut r = error_responses(errors);
    if let Value::Object(m) = &mut r {
        m.insert(
            "200".into(),
            json!({"description": description, "content": {"application/json": {"schema": schema}}}),
        );
    }
    r
}

fn query(name: &str, schema: Value, description: &str) -> Value {
    json!({"name": name, "in": "query", "required": false, "schema": schema, "description": description})
}

fn path(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}, "description": description})
}

fn body(schema: Value, required: bool) -> Value {
    json!({"required": required, "content": {"application/json": {"schema": schema}}})
}

/// The audit log's filters, the same for a page, an export and the usage report.
fn audit_filters() -> Vec<Value> {
    vec![
        query(
            "tool",
            json!({"type": "string"}),
            "Only calls to this tool.",
        ),
        query(
            "status",
            json!({"type": "string"}),
            "Only calls that ended so (success, permission_denied, validation_error, ...).",
        ),
        query(
            "agent",
            json!({"type": "string"}),
            "Only calls from this agent.",
        ),
        query(
            "skill",
            json!({"type": "string"}),
            "Only calls under this skill.",
        ),
        query(
            "since",
            json!({"type": "integer"}),
            "Started at or after (µs since the epoch).",
        ),
        query(
            "until",
            json!({"type": "integer"}),
            "Started before (µs since the epoch).",
        ),
        query(
            "text",
            json!({"type": "string"}),
            "Tool, arguments, error or output contain this text.",
        ),
        query(
            "violations",
            json!({"type": "boolean"}),
            "Only calls that broke a rule.",
        ),
    ]
}

/// The whole document.
pub(crate) fn document() -> Value {
    let any = json!({"type": "object"});
    let std_errors = ["401", "403", "500"];
    let tool = path("name", "The tool's name.");
    let tier_body = body(
        json!({"type": "object", "additionalProperties": false, "properties": {
            "tier": {"type": "string", "enum": ["core", "pro", "teams", "enterprise"], "description": "Default: the tier this installation runs."}
        }}),
        false,
    );
    let answer_body = body(json!({"$ref": "#/components/schemas/Answer"}), false);
    let audit_filters = audit_filters();
    let mut list_params = audit_filters.clone();
    list_params.push(query(
        "cursor",
        json!({"type": "integer"}),
        "A previous page's next_cursor.",
    ));
    list_params.push(query(
        "limit",
        json!({"type": "integer", "minimum": 1, "maximum": 1000}),
        "Page size (default 50).",
    ));
    let mut export_params = audit_filters;
    export_params.push(query(
        "format",
        json!({"type": "string", "enum": ["jsonl", "csv"]}),
        "Default jsonl.",
    ));

    let mut doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Toolwarden admin API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "What the desktop app and the CLI do, for scripts. Served by `toolwarden serve` (and the desktop app while it runs) next to MCP at /mcp. Every request needs `Authorization: Bearer <token>` with the administrator's token (the data directory's serve-token file; `toolwarden serve token` prints it). Agents' tokens reach /mcp only. Changes are recorded in the admin log as made by `api`."
        },
        "servers": [{"url": "http://127.0.0.1:8790/api/v1"}],
        "security": [{"bearer": []}],
        "paths": {
            "/openapi.json": {"get": {"operationId": "openapi", "summary": "This document.", "responses": ok("The document.", any.clone(), &std_errors)}},
            "/tools": {
                "get": {
                    "operationId": "listTools", "summary": "Every registered tool and what policy decides for it before arguments are known.",
                    "parameters": [
                        query("search", json!({"type": "string"}), "Name or description contains this."),
                        query("category", json!({"type": "string"}), "Only this category."),
                        query("group", json!({"type": "string"}), "Only this group."),
                        query("tier", json!({"type": "string"}), "Only tools available in this tier."),
                        query("agent", json!({"type": "string"}), "Whose view of policy the policy field shows (default api)."),
                    ],
                    "responses": ok("The tools.", json!({"type": "array", "items": {"$ref": "#/components/schemas/ToolSummary"}}), &["400", "401", "403", "500"])
                },
                "post": {
                    "operationId": "createTool", "summary": "Adds a custom tool (the tool-definition JSON format, with a command).",
                    "requestBody": body(json!({"$ref": "#/components/schemas/ToolSpec"}), true),
                    "responses": {
                        "201": {"description": "Added.", "content": {"application/json": {"schema": any.clone()}}},
                        "401": error_responses(&["401"])["401"], "403": error_responses(&["403"])["403"],
                        "409": error_responses(&["409"])["409"], "422": error_responses(&["422"])["422"]
                    }
                }
            },
            "/tools/{name}": {
                "get": {"operationId": "getTool", "summary": "One tool: its summary, definition and (for a custom tool) its command.", "parameters": [tool.clone()], "responses": ok("The tool.", any.clone(), &["401", "403", "404"])},
                "put": {"operationId": "replaceTool", "summary": "Adds or replaces a custom tool; the body's name must be the path's.", "parameters": [tool.clone()], "requestBody": body(json!({"$ref": "#/components/schemas/ToolSpec"}), true), "responses": ok("Saved; created says whether it is new.", any.clone(), &["400", "401", "403", "409", "422"])},
                "delete": {"operationId": "deleteTool", "summary": "Removes a custom tool (built-in tools cannot be removed).", "parameters": [tool.clone()], "responses": {
                    "204": {"description": "Removed."},
                    "401": error_responses(&["401"])["401"], "403": error_responses(&["403"])["403"],
                    "404": error_responses(&["404"])["404"], "409": error_responses(&["409"])["409"]
                }}
            },
            "/tools/{name}/enable": {"post": {"operationId": "enableTool", "summary": "Switches a tool on for a tier, for every process on the data directory.", "parameters": [tool.clone()], "requestBody": tier_body.clone(), "responses": ok("The switch; changed is false when it already was on.", any.clone(), &["400", "401", "403", "404"])}},
            "/tools/{name}/disable": {"post": {"operationId": "disableTool", "summary": "Switches a tool off for a tier: every call is denied with tool_disabled.", "parameters": [tool], "requestBody": tier_body, "responses": ok("The switch.", any.clone(), &["400", "401", "403", "404"])}},
            "/policy/explain": {"post": {
                "operationId": "explainPolicy", "summary": "How policy would judge a call now, layer by layer with the rule (file:line) behind each verdict; nothing runs or is counted.",
                "requestBody": body(json!({"type": "object", "required": ["tool"], "additionalProperties": false, "properties": {
                    "tool": {"type": "string"}, "arguments": {"type": "object"},
                    "agent": {"type": "string", "description": "Default api."}, "skill": {"type": "string"}, "user": {"type": "string"}
                }}), true),
                "responses": ok("The decision and its trace.", any.clone(), &["400", "401", "403", "404"])
            }},
            "/policy/reload": {"post": {"operationId": "reloadPolicy", "summary": "Reloads policy from its files; an invalid policy is refused and the one in force stays.", "responses": ok("Reloaded, with any warnings.", any.clone(), &["401", "403", "422"])}},
            "/confirmations": {"get": {
                "operationId": "listConfirmations", "summary": "Requests for a person's approval.",
                "parameters": [
                    query("state", json!({"type": "string", "enum": ["pending", "approved", "denied", "expired", "all"]}), "Default pending."),
                    query("limit", json!({"type": "integer", "minimum": 1, "maximum": 1000}), "Default 50."),
                ],
                "responses": ok("The requests, newest first.", json!({"type": "array", "items": any.clone()}), &["400", "401", "403"])
            }},
            "/confirmations/{id}/approve": {"post": {"operationId": "approveConfirmation", "summary": "Lets the waiting call run; optionally remembers the approval as a grant.", "parameters": [path("id", "The request's id.")], "requestBody": answer_body.clone(), "responses": ok("The request as it now stands.", any.clone(), &["400", "401", "403", "404", "409"])}},
            "/confirmations/{id}/deny": {"post": {"operationId": "denyConfirmation", "summary": "Refuses the waiting call.", "parameters": [path("id", "The request's id.")], "requestBody": answer_body, "responses": ok("The request as it now stands.", any.clone(), &["400", "401", "403", "404", "409"])}},
            "/audit": {"get": {"operationId": "queryAudit", "summary": "One page of audit records, newest first.", "parameters": list_params, "responses": ok("The page.", json!({"type": "object", "properties": {"rows": {"type": "array"}, "next_cursor": {"type": ["integer", "null"]}, "scanned_to": {"type": ["integer", "null"]}}}), &["400", "401", "403"])}},
            "/audit/export": {"get": {"operationId": "exportAudit", "summary": "Every matching record, streamed as JSON lines or CSV.", "parameters": export_params, "responses": {
                "200": {"description": "The records.", "content": {"application/jsonl": {}, "text/csv": {}}},
                "400": error_responses(&["400"])["400"], "401": error_responses(&["401"])["401"], "403": error_responses(&["403"])["403"]
            }}},
            "/audit/{execution_id}": {"get": {"operationId": "getAuditRecord", "summary": "One audit record, with its decision trace.", "parameters": [path("execution_id", "The call's execution id.")], "responses": ok("The record.", any.clone(), &["401", "403", "404"])}},
            "/upstream": {"get": {"operationId": "upstreamServers", "summary": "The upstream MCP servers this process imports: connected or not (and why), their tools, which are quarantined, how often they connected.", "responses": ok("The servers.", json!({"type": "array", "items": any.clone()}), &["401", "403"])}},
            "/upstream/review": {"get": {"operationId": "upstreamReview", "summary": "Quarantined upstream tools: each with the definition pinned and the one its server gives now.", "responses": ok("The tools waiting for review.", json!({"type": "array", "items": any.clone()}), &["401", "403"])}},
            "/upstream/review/{tool}/accept": {"post": {"operationId": "acceptUpstreamChange", "summary": "Pins a quarantined tool's new definition; it is callable again in every process.", "parameters": [path("tool", "SERVER__TOOL")], "responses": ok("Accepted.", any.clone(), &["401", "403", "404", "409"])}},
            "/events": {"get": {"operationId": "events", "summary": "Execution events as server-sent events: `event: execution` with the event's JSON, `event: missed` when a slow reader lost some.", "responses": {
                "200": {"description": "The stream.", "content": {"text/event-stream": {}}},
                "401": error_responses(&["401"])["401"], "403": error_responses(&["403"])["403"]
            }}}
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {"code": {"type": "string"}, "message": {"type": "string"}, "field": {"type": "string", "description": "The part of the request at fault, when one is named."}}}}},
                "ToolSummary": {"type": "object", "properties": {
                    "name": {"type": "string"}, "kind": {"type": "string"}, "group": {"type": "string"}, "category": {"type": "string"},
                    "risk_level": {"type": "string"}, "license_tier": {"type": "string"}, "requires_confirmation": {"type": "boolean"},
                    "policy": {"type": ["string", "null"], "enum": ["allow", "ask", "deny", null]}, "disabled_tiers": {"type": "array", "items": {"type": "string"}},
                    "description": {"type": "string"}
                }},
                "ToolSpec": {"type": "object", "required": ["name", "description", "parameters", "command"], "description": "A tool definition (name, description, parameters as JSON Schema, category, risk_level, ...) with the command template a custom tool runs."},
                "Answer": {"type": "object", "additionalProperties": false, "properties": {
                    "note": {"type": "string"},
                    "remember": {"description": "Approve only: remember as a grant: \"exact\", \"tool\" or {\"pattern\": {...}}."},
                    "who": {"description": "Whose calls the grant covers: \"anyone\", \"same_caller\" (default) or {\"agent\": id}."},
                    "duration_secs": {"type": "integer", "minimum": 1}
                }}
            }
        }
    });
    if let Some(paths) = doc["paths"].as_object_mut() {
        for more in [skill_paths(), chain_paths(), control_paths()] {
            if let Value::Object(more) = more {
                paths.extend(more);
            }
        }
    }
    doc
}

/// The chain operations (`/chains...`), added to the document's paths.
fn chain_paths() -> Value {
    let any = json!({"type": "object"});
    json!({
        "/chains/plan": {"post": {"operationId": "planChain", "summary": "Asks the configured language model ([classifier] endpoint) for a chain reaching a goal within a skill's tools; the plan is checked like a chain file and not saved.", "requestBody": body(json!({"type": "object", "required": ["goal"], "additionalProperties": false, "properties": {"goal": {"type": "string"}, "skill": {"type": "string"}}}), true), "responses": ok("The plan: its YAML, the valid chains, the diagnostics, the model.", any.clone(), &["400", "401", "403", "404", "422", "503"])}},
        "/chains": {"post": {"operationId": "saveChain", "summary": "Saves a chain file a person accepted into the chains directory (NAME.yaml per chain) and loads it; refused whole with any error (422) or a name that exists (409) unless `replace` is set and the chain was saved this way (its NAME.yaml; a chain of a skill or of a file holding others: 409). Each file is written whole; recorded in the admin log with what a replaced file held.", "parameters": [query("skill", json!({"type": "string"}), "Check it as a chain of this skill."), query("replace", json!({"type": "boolean"}), "Save over the chain of that name saved this way before.")], "requestBody": {"required": true, "content": {"application/yaml": {"schema": {"type": "string"}}}}, "responses": {"201": {"description": "The chains saved.", "content": {"application/json": {"schema": {"type": "object", "properties": {"saved": {"type": "array", "items": {"type": "string"}}}}}}}, "400": {"description": "Bad request."}, "401": {"description": "No or bad token."}, "403": {"description": "Refused."}, "409": {"description": "A chain of that name exists, or lives in a skill or another file."}, "422": {"description": "The chain has errors."}}}, "get": {"operationId": "listChains", "summary": "Every chain loaded (from the chains directory and the skills), each registered as the tool chain__NAME, and every problem of those that did not load (FILE:LINE).", "responses": ok("The chains and the problems.", json!({"type": "object", "properties": {"chains": {"type": "array", "items": any.clone()}, "problems": {"type": "array", "items": any.clone()}}}), &["401", "403"])}},
        "/chains/check": {"post": {"operationId": "checkChain", "summary": "A chain file's diagnostics against the tools registered now, each with its line, and the chains in it without errors. Nothing is saved.", "parameters": [query("skill", json!({"type": "string"}), "Check it as a chain of this skill.")], "requestBody": {"required": true, "content": {"application/yaml": {"schema": {"type": "string"}}}}, "responses": ok("The valid chains and the diagnostics.", json!({"type": "object", "properties": {"valid": {"type": "array", "items": {"type": "string"}}, "diagnostics": {"type": "array", "items": any.clone()}}}), &["400", "401", "403"])}},
        "/chains/runs": {"get": {"operationId": "chainRuns", "summary": "Chain runs, newest first: status, input, output, and each step's status, timing and calls.", "parameters": [query("chain", json!({"type": "string"}), "Only runs of this chain."), query("status", json!({"type": "string", "enum": ["running", "completed", "failed", "cancelled", "timeout", "interrupted"]}), "Only runs that ended this way."), query("limit", json!({"type": "integer", "minimum": 1, "maximum": 1000}), "At most this many (50 unless given).")], "responses": ok("The runs.", json!({"type": "array", "items": any.clone()}), &["400", "401", "403"])}},
        "/chains/runs/{id}": {"get": {"operationId": "chainRun", "summary": "One run and the audit records of its steps' calls.", "parameters": [path("id", "The run's id: the chain call's execution id.")], "responses": ok("The run and its calls.", any.clone(), &["401", "403", "404"])}},
        "/chains/{name}": {"get": {"operationId": "getChain", "summary": "One chain: its model as a chain file writes it, and that YAML.", "parameters": [path("name", "The chain's name.")], "responses": ok("The chain.", any, &["401", "403", "404"])}}
    })
}

/// The skills operations (`/skills...`), added to the document's paths.
fn skill_paths() -> Value {
    let any = json!({"type": "object"});
    let skill = path("name", "The skill's folder name.");
    json!({
            "/skills": {"get": {"operationId": "listSkills", "summary": "Every skill of the skills directory: loaded or not, its tools, its diagnostics. 503 while the directory cannot be read.", "responses": ok("The skills.", json!({"type": "array", "items": any.clone()}), &["401", "403", "503"])}},
            "/skills/check": {"get": {"operationId": "checkSkills", "summary": "Every problem of the skills directory: each SKILL.md's diagnostics (FILE:LINE), the skill map's problems, permissions no capability matches.", "responses": ok("The findings and how many skills load.", json!({"type": "object", "properties": {"findings": {"type": "array", "items": {"type": "string"}}, "errors": {"type": "integer"}, "loaded": {"type": "integer"}, "total": {"type": "integer"}}}), &["401", "403", "503"])}},
            "/skills/capabilities": {"get": {"operationId": "toolCapabilities", "summary": "Every registered tool's capabilities: who classified it, with what confidence and why.", "parameters": [query("tool", json!({"type": "string"}), "Only this tool.")], "responses": ok("The threshold and the tools.", any.clone(), &["400", "401", "403", "404"])}},
            "/skills/lifecycle/metrics": {"get": {"operationId": "skillMetrics", "summary": "Lifecycle figures: per skill, activations, resolved tools by provenance, overrides, calls and skill_denied refusals; who classified the tools.", "responses": ok("The figures.", any.clone(), &["401", "403", "503"])}},
            "/skills/classify/{tool}": {"post": {"operationId": "classifyTool", "summary": "Sets a tool's capabilities as the administrator ({\"set\": [...], \"note\"}), clears that setting ({\"clear\": true}) or runs the classifier again ({\"again\": true}).", "parameters": [path("tool", "The tool's name.")], "requestBody": body(json!({"type": "object", "additionalProperties": false, "properties": {"set": {"type": "array", "items": {"type": "string"}}, "note": {"type": "string"}, "clear": {"type": "boolean"}, "again": {"type": "boolean"}}}), true), "responses": ok("The tool's classification now.", any.clone(), &["400", "401", "403", "404", "422"])}},
            "/skills/{name}": {"get": {"operationId": "getSkill", "summary": "One skill: its file, manifest, resolved tools and diagnostics.", "parameters": [skill.clone()], "responses": ok("The skill.", any.clone(), &["401", "403", "404", "422", "503"])}},
            "/skills/{name}/resolved-tools": {"get": {"operationId": "resolvedTools", "summary": "The tools a skill may use now, each with where it came from (manifest, inherited, capability, override) and who classified it.", "parameters": [skill.clone()], "responses": ok("The resolved skill.", any.clone(), &["401", "403", "404", "422", "503"])}},
            "/skills/{name}/overrides": {"get": {"operationId": "skillOverrides", "summary": "The administrators' overrides of one skill, with who, when and why.", "parameters": [skill.clone()], "responses": ok("The overrides.", json!({"type": "array", "items": any.clone()}), &["401", "403", "422"])}},
            "/skills/{name}/override": {"post": {"operationId": "overrideSkill", "summary": "Adds a tool to a skill (up to an access level), removes one, or clears such an override; recorded in the admin log.", "parameters": [skill.clone()], "requestBody": body(json!({"type": "object", "required": ["tool", "action"], "additionalProperties": false, "properties": {"tool": {"type": "string"}, "action": {"type": "string", "enum": ["add", "remove", "clear"]}, "access_level": {"type": "string", "enum": ["standard", "elevated", "admin"], "description": "With add; default standard."}, "reason": {"type": "string", "maxLength": 1000, "description": "Not with clear."}}}), true), "responses": ok("The override now and the one it replaced.", any.clone(), &["400", "401", "403", "404", "422", "503"])}},
            "/skills/{name}/skill-md": {
                "get": {"operationId": "getSkillMd", "summary": "A skill's SKILL.md as it is on disk.", "parameters": [skill.clone()], "responses": {
                    "200": {"description": "The file.", "content": {"text/markdown": {}}},
                    "401": error_responses(&["401"])["401"], "403": error_responses(&["403"])["403"],
                    "404": error_responses(&["404"])["404"], "422": error_responses(&["422"])["422"]
                }},
                "put": {"operationId": "putSkillMd", "summary": "Saves a SKILL.md sent as the body (at most 256 KiB): refused with every diagnostic and nothing written when it has an error, in force at once otherwise; a new skill gets its folder.", "parameters": [skill.clone()], "requestBody": {"required": true, "content": {"text/markdown": {"schema": {"type": "string"}}}}, "responses": {
                    "200": {"description": "Saved, with any warnings.", "content": {"application/json": {"schema": any.clone()}}},
                    "201": {"description": "Created, with any warnings.", "content": {"application/json": {"schema": any.clone()}}},
                    "401": error_responses(&["401"])["401"], "403": error_responses(&["403"])["403"],
                    "422": error_responses(&["422"])["422"], "503": error_responses(&["503"])["503"]
                }}
            },
            "/skills/{name}/skill-md/check": {"post": {"operationId": "checkSkillMd", "summary": "A SKILL.md's diagnostics, without saving it.", "parameters": [skill], "requestBody": {"required": true, "content": {"text/markdown": {"schema": {"type": "string"}}}}, "responses": ok("The diagnostics, with their lines.", json!({"type": "array", "items": any.clone()}), &["401", "403", "422"])}}
    })
}

/// Grants, the operational mode, the usage report and the admin log, calls in flight and the
/// sandbox's report, added to the document's paths.
fn control_paths() -> Value {
    let any = json!({"type": "object"});
    let grant = json!({"type": "object", "description": "A grant as stored: id, tool, scope (exact, pattern or tool) with its arguments, agent_id (null: any caller), skill, created_at, created_by, expires_at (null: until revoked), revoked_at, revoked_by, confirmation_id."});
    let mode =
        json!({"type": "string", "enum": ["normal", "alert", "degraded", "lockdown", "recovery"]});
    let checkpoint = json!({"type": ["object", "null"], "description": "A signed checkpoint: created_at, audit_head_id, audit_head_hash, audit_count, admin_head_id, admin_head_hash, admin_count, public_key, signature (hex)."});
    let verify_report = json!({"type": "object", "properties": {
        "audit_records": {"type": "integer"}, "admin_entries": {"type": "integer"},
        "checkpoints": {"type": "integer"}, "archives": {"type": "integer"},
        "audit_uncovered": {"type": "integer"}, "problem_count": {"type": "integer"},
        "problems": {"type": "array", "items": {"type": "object", "properties": {
            "log": {"type": "string"}, "id": {"type": ["integer", "null"]},
            "kind": {"type": "string"}, "message": {"type": "string"}
        }}}
    }});
    let usage_rows = json!({"type": "array", "items": {"type": "object", "properties": {
        "key": {"type": "string"}, "calls": {"type": "integer"}, "success": {"type": "integer"}, "failed": {"type": "integer"},
        "denied": {"type": "integer"}, "invalid": {"type": "integer"}, "awaiting_confirmation": {"type": "integer"},
        "violations": {"type": "integer"}, "avg_duration_us": {"type": "integer"}, "first_at": {"type": "integer"},
        "last_at": {"type": "integer"}, "distinct_tools": {"type": "integer"}
    }}});
    json!({
        "/grants": {
            "get": {"operationId": "listGrants", "summary": "The grants in force (standing approvals that turn a policy's ask into an allow), oldest first.", "parameters": [query("all", json!({"type": "boolean"}), "Revoked and lapsed grants too.")], "responses": ok("The grants.", json!({"type": "array", "items": grant.clone()}), &["400", "401", "403"])},
            "post": {
                "operationId": "createGrant", "summary": "Gives a standing approval for a tool's calls, and releases the waiting calls it covers; recorded in the admin log.",
                "requestBody": body(json!({"type": "object", "required": ["tool"], "additionalProperties": false, "properties": {
                    "tool": {"type": "string"},
                    "remember": {"description": "Which calls: \"tool\" (default, every call) or {\"pattern\": {ARGUMENT: GLOB or value}}."},
                    "who": {"description": "Whose calls: \"anyone\" (default) or {\"agent\": id}."},
                    "duration_secs": {"type": "integer", "minimum": 1, "description": "Default: until revoked."}
                }}), true),
                "responses": {
                    "201": {"description": "The grant as stored.", "content": {"application/json": {"schema": grant}}},
                    "400": error_responses(&["400"])["400"], "401": error_responses(&["401"])["401"], "403": error_responses(&["403"])["403"],
                    "404": error_responses(&["404"])["404"], "422": error_responses(&["422"])["422"]
                }
            }
        },
        "/grants/{id}/revoke": {"post": {"operationId": "revokeGrant", "summary": "Revokes a grant; it covers no call from now on. Recorded in the admin log.", "parameters": [path("id", "The grant's id.")], "responses": ok("Revoked.", any.clone(), &["401", "403", "404"])}},
        "/mode": {
            "get": {"operationId": "getMode", "summary": "The operational mode in force, and every mode there is.", "responses": ok("The mode.", json!({"type": "object", "properties": {"mode": mode.clone(), "modes": {"type": "array", "items": mode.clone()}}}), &["401", "403"])},
            "put": {"operationId": "setMode", "summary": "Switches the operational mode for every process on the data directory; recorded in the admin log.", "requestBody": body(json!({"type": "object", "required": ["mode"], "additionalProperties": false, "properties": {"mode": mode.clone()}}), true), "responses": ok("The mode before and now.", json!({"type": "object", "properties": {"from": mode.clone(), "to": mode}}), &["400", "401", "403"])}
        },
        "/audit/report": {"get": {"operationId": "auditReport", "summary": "Calls per tool, per caller and per skill among the matching records: how many, how they ended, how long they took.", "parameters": audit_filters(), "responses": ok("The report.", json!({"type": "object", "properties": {"by_tool": usage_rows.clone(), "by_caller": usage_rows.clone(), "by_skill": usage_rows}}), &["400", "401", "403"])}},
        "/audit/verify": {
            "get": {"operationId": "verifyAudit", "summary": "Recomputes the audit and admin logs' hash chains, checks every output against its digest and every signed checkpoint and archive; the report names each edited, deleted, inserted or moved record (problem_count 0: intact).", "responses": ok("The report.", verify_report.clone(), &["401", "403"])},
            "post": {"operationId": "verifyAuditWith", "summary": "The same, also against checkpoints kept elsewhere (as POST /audit/checkpoint returned them).", "requestBody": body(json!({"type": "object", "required": ["checkpoints"], "properties": {"checkpoints": {"type": "array", "items": checkpoint.clone()}}, "additionalProperties": false}), true), "responses": ok("The report.", verify_report, &["400", "401", "403"])}
        },
        "/audit/checkpoint": {"post": {"operationId": "auditCheckpoint", "summary": "Signs a checkpoint of both logs' heads now (or returns the newest, if nothing was appended since) to keep elsewhere; null while both logs are empty.", "responses": ok("The checkpoint.", checkpoint, &["401", "403"])}},
        "/audit/changes": {"get": {
            "operationId": "adminLog", "summary": "One page of the admin log, newest first: who changed the rules and when (mode switches, policy reloads, grants, tool switches, custom tools, skills, classifications).",
            "parameters": [
                query("since", json!({"type": "integer"}), "Made at or after (µs since the epoch)."),
                query("kind", json!({"type": "string"}), "Only changes of this kind (mode_changed, grant_created, ...)."),
                query("cursor", json!({"type": "integer", "minimum": 1}), "A previous page's next_cursor."),
                query("limit", json!({"type": "integer", "minimum": 1, "maximum": 1000}), "Page size (default 50)."),
            ],
            "responses": ok("The page; next_cursor is null on the last.", json!({"type": "object", "properties": {"rows": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}, "at": {"type": "integer"}, "actor": {"type": "string"}, "kind": {"type": "string"}, "summary": {"type": "string"}, "details": {}}}}, "next_cursor": {"type": ["integer", "null"]}}}), &["400", "401", "403"])
        }},
        "/running": {"get": {"operationId": "runningCalls", "summary": "The calls in flight (running, or waiting for a person) in this process and the others on the same data directory, and on a team store on the other replicas, oldest first.", "responses": ok("The calls, each with the process running it (and its replica, host:pid, when it is another replica's).", json!({"type": "array", "items": {"type": "object", "properties": {"pid": {"type": "integer"}, "replica": {"type": "string"}, "execution_id": {"type": "string"}, "trace_id": {"type": "string"}, "tool": {"type": "string"}, "agent_id": {"type": "string"}, "started_at": {"type": "integer"}}}}), &["401", "403"])}},
        "/running/{execution_id}/cancel": {"post": {"operationId": "cancelCall", "summary": "Cancels a call in flight in whichever process on the data directory runs it; its audit record says how it ended.", "parameters": [path("execution_id", "The call's execution id.")], "responses": ok("Cancel requested.", any.clone(), &["400", "401", "403", "404"])}},
        "/sandbox/doctor": {"get": {"operationId": "sandboxDoctor", "summary": "What isolation this host can give and why not: the helper, kernel features, each protection and level, and the escape self-test (run now if it has not run yet).", "responses": ok("The report, as `toolwarden sandbox doctor --json` prints it.", any, &["401", "403"])}}
    })
}

/// Every operation the document lists, as (method, path template).
#[cfg(test)]
pub(crate) fn operations() -> Vec<(String, String)> {
    let doc = document();
    let mut ops = Vec::new();
    if let Some(paths) = doc["paths"].as_object() {
        for (p, item) in paths {
            if let Some(methods) = item.as_object() {
                for m in methods.keys() {
                    ops.push((m.to_uppercase(), p.clone()));
                }
            }
        }
    }
    ops
}
