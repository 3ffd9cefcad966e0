//! The configuration file on real text: every setting read, every mistake placed at its line.

use super::*;
use pretty_assertions::assert_eq;

fn check(text: &str, expect: Result<&str, &str>) {
    let got = Config::parse(
        text,
        Path::new("/etc/tw/config.toml"),
        Some(Path::new("/home/u")),
    );
    match (got, expect) {
        (Ok(c), Ok(debug_contains)) => {
            let dbg = format!("{c:?}");
            assert!(dbg.contains(debug_contains), "{dbg}\n---\n{debug_contains}");
        }
        (Err(e), Err(msg)) => assert_eq!(e.to_string(), msg),
        (got, expect) => panic!("got {got:?}, expected {expect:?}"),
    }
}

#[test]
fn full_config() {
    let text = r#"
license_tier = "pro"
mode = "alert"
workspace = ["~/proj", "rel", "/abs"]
schema_cache_capacity = 16
policy_files = ["policy.d/base.toml"]

[policy]
default = "allow"
allow = ["group:fs"]
deny = [
  "delete_*",
]

[audit]
synchronous = "full"
keep_days = 90

[tools.delete_file]
requires_confirmation = false
"#;
    let c = Config::parse(
        text,
        Path::new("/etc/tw/config.toml"),
        Some(Path::new("/home/u")),
    )
    .unwrap();
    assert_eq!(c.license_tier, LicenseTier::Pro);
    assert_eq!(c.mode, OperationalMode::Alert);
    assert_eq!(
        c.workspace,
        vec![
            PathBuf::from("/home/u/proj"),
            PathBuf::from("/etc/tw/rel"),
            PathBuf::from("/abs")
        ]
    );
    assert_eq!(c.schema_cache_capacity, 16);
    assert_eq!(c.audit_synchronous, Synchronous::Full);
    assert_eq!(c.audit_keep_days, Some(90));
    let policy = c.policy.as_ref().unwrap();
    assert_eq!(policy.allow.len(), 1);
    assert_eq!(policy.deny[0].get_ref(), "delete_*");
    assert_eq!(
        c.policy_files,
        vec![PathBuf::from("/etc/tw/policy.d/base.toml")]
    );
    assert_eq!(
        c.tools.get("delete_file"),
        Some(&ToolOverride {
            enabled: None,
            requires_confirmation: Some(false)
        })
    );
}

#[test]
fn errors_have_file_line_column() {
    check(
        "mode = \"panic\"\n",
        Err(
            "/etc/tw/config.toml:1:8: unknown operational mode \"panic\": expected one of normal, alert, degraded, lockdown, recovery",
        ),
    );
    check(
        "[policy]\nalow = []\n",
        Err(
            "/etc/tw/config.toml:2:1: unknown field `alow`, expected one of `default`, `allow`, `deny`, `modes`, `exec`, `rules`, `access`, `permissions`, `rate_limits`, `confirmation`",
        ),
    );
    check(
        "license_tier = \n",
        Err("/etc/tw/config.toml:1:16: string values must be quoted, expected literal string"),
    );
    check(
        "[audit]\nkeep_days = 0\n",
        Err(
            "/etc/tw/config.toml:2:13: [audit] keep_days must be at least 1 (leave it out to keep every record)",
        ),
    );
    check(
        "[store]\nurl = \"mysql://db/tw\"\n",
        Err(
            "/etc/tw/config.toml:2:7: [store] url: the team store URL must start with postgres:// or postgresql:// (got \"mysql\")",
        ),
    );
    check(
        "[store]\nurl = \"postgres://tw@db/tw\"\n",
        Ok("store_url: Some(\"postgres://tw@db/tw\")"),
    );
    check(
        "[tools.\"Bad\"]\nenabled = false\n",
        Err(
            "/etc/tw/config.toml:1:8: tools: invalid tool name \"Bad\": must start with a lowercase letter",
        ),
    );
}

#[test]
fn upstream_servers_are_a_command_or_an_url() {
    let c = Config::parse(
        "[upstream.fs]\ncommand = \"node\"\nargs = [\"fs.js\", \"docs\"]\nisolation = \"strict\"\n\
         read_only = [\"lib\"]\n[upstream.web]\nurl = \"https://mcp.example/mcp\"\n\
         headers = { Authorization = \"Bearer x\" }\n",
        Path::new("/etc/tw/config.toml"),
        None,
    )
    .unwrap();
    assert_eq!(
        c.upstream["fs"].transport,
        UpstreamTransport::Stdio {
            command: "node".into(),
            args: vec!["fs.js".into(), "docs".into()],
            env: BTreeMap::new(),
            cwd: None,
            isolation: tw_core::IsolationLevel::Strict,
            network: None,
            read_only: vec![PathBuf::from("/etc/tw/lib")],
            read_write: vec![],
        }
    );
    assert_eq!(
        c.upstream["web"].transport,
        UpstreamTransport::Http {
            url: "https://mcp.example/mcp".into(),
            headers: BTreeMap::from([("Authorization".into(), "Bearer x".into())]),
        }
    );
    // Hosts granted to a strict server; true is every host, still through the gatekeeper; no
    // host listed is no network.
    let network = |value: &str| {
        let text =
            format!("[upstream.x]\ncommand = \"a\"\nisolation = \"strict\"\nnetwork = {value}\n");
        match Config::parse(&text, Path::new("/etc/tw/config.toml"), None)
            .unwrap()
            .upstream["x"]
            .transport
            .clone()
        {
            UpstreamTransport::Stdio { network, .. } => network,
            UpstreamTransport::Http { .. } => unreachable!(),
        }
    };
    let hosts = |h: &[&str]| Some(tw_core::target::DomainList::parse(h).unwrap());
    assert_eq!(
        [
            network("[\"pypi.org\", \"*.pythonhosted.org\"]"),
            network("true"),
            network("false"),
            network("[]"),
        ],
        [
            hosts(&["pypi.org", "*.pythonhosted.org"]),
            hosts(&["*"]),
            None,
            None
        ]
    );
    let cases = [
        (
            "[upstream.Fs]\ncommand = \"x\"\n",
            "/etc/tw/config.toml:1:11: upstream.Fs: the name prefixes its tools (NAME__tool): use 1 to 24 lowercase letters, digits and single underscores, starting with a letter",
        ),
        (
            "[upstream.a__b]\ncommand = \"x\"\n",
            "/etc/tw/config.toml:1:11: upstream.a__b: the name prefixes",
        ),
        (
            "[upstream.x]\nargs = []\n",
            "/etc/tw/config.toml:1:11: upstream.x: give command (a program to start) or url",
        ),
        (
            "[upstream.x]\ncommand = \"a\"\nurl = \"http://h\"\n",
            "/etc/tw/config.toml:1:11: upstream.x: give either command or url, not both",
        ),
        (
            "[upstream.x]\ncommand = \"a\"\nisolation = \"none\"\n",
            "/etc/tw/config.toml:3:13: upstream.x: isolation \"none\" would run it inside Toolwarden",
        ),
        (
            "[upstream.x]\nurl = \"ftp://h\"\n",
            "/etc/tw/config.toml:2:7: upstream.x: url must be an http:// or https:// URL; got \"ftp://h\"",
        ),
        (
            "[upstream.x]\nurl = \"http://h\"\nargs = [\"a\"]\n",
            "/etc/tw/config.toml:1:11: upstream.x: args, env, cwd, isolation, network, read_only and read_write are for a command",
        ),
        (
            "[upstream.x]\ncommand = \"a\"\nheaders = { A = \"b\" }\n",
            "/etc/tw/config.toml:1:11: upstream.x: headers are for an url",
        ),
        (
            "[upstream.x]\ncommand = \"a\"\nport = 3\n",
            "/etc/tw/config.toml:3:1: unknown field `port`",
        ),
        (
            "[upstream.x]\ncommand = \"a\"\nnetwork = [\"pypi.org\"]\n",
            "/etc/tw/config.toml:3:11: upstream.x: network lists hosts for a server at strict or \
             restricted isolation; at standard it keeps the host's network, so set isolation = \
             \"strict\"",
        ),
        (
            "[upstream.x]\ncommand = \"a\"\nisolation = \"strict\"\nnetwork = [\"a..b\"]\n",
            "/etc/tw/config.toml:4:11: upstream.x.network: ",
        ),
        (
            "[upstream.x]\ncommand = \"a\"\nnetwork = \"all\"\n",
            "/etc/tw/config.toml:3:11: ",
        ),
    ];
    for (text, want) in cases {
        let got = Config::parse(text, Path::new("/etc/tw/config.toml"), None)
            .unwrap_err()
            .to_string();
        assert!(got.starts_with(want), "{text}\ngot:  {got}\nwant: {want}");
    }
}

#[test]
fn the_serve_section_is_loopback_unless_said_otherwise() {
    let c = Config::parse(
        "[serve]\nlisten = \"127.0.0.1:0\"\nallowed_hosts = [\"TW.lan\"]\n\
         allowed_origins = [\"https://console.example:8443/\"]\n",
        Path::new("/etc/tw/config.toml"),
        None,
    )
    .unwrap();
    assert_eq!(
        c.serve,
        ServeSettings {
            listen: "127.0.0.1:0".parse().unwrap(),
            allow_non_loopback: false,
            allowed_hosts: vec!["tw.lan".into()],
            allowed_origins: vec!["https://console.example:8443".into()],
            sessions: SessionLimits {
                idle_timeout: std::time::Duration::from_secs(1800),
                max_per_token: 64,
            },
        }
    );
    assert_eq!(Config::default().serve.listen, DEFAULT_LISTEN);
    check(
        "[serve]\nlisten = \"0.0.0.0:8790\"\n",
        Err(
            "/etc/tw/config.toml:2:10: serve.listen 0.0.0.0:8790 is not a loopback address: anyone who can reach it could try tokens; set serve.allow_non_loopback = true to mean it",
        ),
    );
    let open = Config::parse(
        "[serve]\nlisten = \"0.0.0.0:8790\"\nallow_non_loopback = true\n",
        Path::new("/etc/tw/config.toml"),
        None,
    )
    .unwrap();
    assert!(open.serve.allow_non_loopback);
    check(
        "[serve]\nlisten = \"localhost\"\n",
        Err(
            "/etc/tw/config.toml:2:10: serve.listen must be an address with a port, like \"127.0.0.1:8790\"; got \"localhost\"",
        ),
    );
    check(
        "[serve]\nallowed_hosts = [\"http://x\"]\n",
        Err(
            "/etc/tw/config.toml:2:18: serve.allowed_hosts: \"http://x\" is not a host name (like \"tw.lan\" or \"tw.lan:8790\")",
        ),
    );
    check(
        "[serve]\nallowed_origins = [\"console.example\"]\n",
        Err(
            "/etc/tw/config.toml:2:20: serve.allowed_origins: \"console.example\" is not an origin (like \"https://console.example:8443\")",
        ),
    );
}

#[test]
fn session_limits_are_read_and_kept_in_range() {
    let c = Config::parse(
        "[serve]\nsession_idle_timeout_secs = 90\nmax_sessions_per_token = 3\n",
        Path::new("/etc/tw/config.toml"),
        None,
    )
    .unwrap();
    assert_eq!(
        c.serve.sessions,
        SessionLimits {
            idle_timeout: std::time::Duration::from_secs(90),
            max_per_token: 3,
        }
    );
    let cases = [
        (
            "[serve]\nsession_idle_timeout_secs = 0\n",
            "/etc/tw/config.toml:2:29: serve.session_idle_timeout_secs must be between 1 and 604800 (a week); got 0",
        ),
        (
            "[serve]\nlisten = \"127.0.0.1:1\"\nsession_idle_timeout_secs = 604801\n",
            "/etc/tw/config.toml:3:29: serve.session_idle_timeout_secs must be between 1 and 604800 (a week); got 604801",
        ),
        (
            "[serve]\nmax_sessions_per_token = 0\n",
            "/etc/tw/config.toml:2:26: serve.max_sessions_per_token must be between 1 and 10000; got 0",
        ),
        (
            "[serve]\nmax_sessions_per_token = 10001\n",
            "/etc/tw/config.toml:2:26: serve.max_sessions_per_token must be between 1 and 10000; got 10001",
        ),
        (
            "[serve]\nmax_sessions_per_token = -1\n",
            "/etc/tw/config.toml:2:26: invalid value: integer `-1`, expected usize",
        ),
        (
            "[serve]\nsession_idle_timeout_secs = \"30m\"\n",
            "/etc/tw/config.toml:2:29: invalid type: string \"30m\", expected u64",
        ),
    ];
    for (text, want) in cases {
        check(text, Err(want));
    }
}

#[test]
fn sandbox_and_commands_sections() {
    let c = Config::parse(
        "[sandbox]\nread_only = [\"~/.cargo\", \"tools\"]\nuid = 5000\nhelper = \"bin/h\"\npool = 4\n\
         [commands]\ntest = [\"cargo\", \"test\"]\nenv_allow = [\"MY_*\"]\n",
        Path::new("/etc/tw/config.toml"),
        Some(Path::new("/home/u")),
    )
    .unwrap();
    assert_eq!(
        c.sandbox,
        SandboxSettings {
            helper: Some(PathBuf::from("/etc/tw/bin/h")),
            ids: Some((5000, 5000)),
            read_only: vec![
                PathBuf::from("/home/u/.cargo"),
                PathBuf::from("/etc/tw/tools")
            ],
            pool: Some(4),
        }
    );
    assert_eq!(
        c.commands,
        Commands {
            test: Some(vec!["cargo".into(), "test".into()]),
            lint: None,
            env_allow: vec!["MY_*".into()],
        }
    );
    check(
        "[sandbox]\nuid = 0\n",
        Err(
            "/etc/tw/config.toml: sandbox.uid and sandbox.gid must not be 0: strict tools never run as root",
        ),
    );
    check(
        "[sandbox]\npool = 17\n",
        Err(
            "/etc/tw/config.toml:2:8: sandbox.pool is 17; at most 16 sandboxes are kept ready per shape of call (each idle one holds one or two small processes)",
        ),
    );
    check(
        "[commands]\ntest = []\n",
        Err(
            "/etc/tw/config.toml:2:8: commands: a command is a non-empty argv list whose first element names the program",
        ),
    );
    check(
        "[sandbox]\nnetwork = true\n",
        Err(
            "/etc/tw/config.toml:2:1: unknown field `network`, expected one of `helper`, `uid`, `gid`, `read_only`, `pool`",
        ),
    );
}

#[test]
fn empty_file_is_the_default_policy() {
    check("", Ok("policy: None, policy_files: []"));
}

#[test]
fn the_network_section_sets_limits_names_secrets_and_the_search_provider() {
    let text = r#"
[network]
connect_timeout_ms = 2500
max_response_bytes = 65536
max_redirects = 0
nameservers = ["10.0.0.53", "10.0.0.54:5353", "[fd00::53]:53"]

[network.resolve]
"Wiki.LAN." = ["192.168.1.20", "fd00::20"]

[network.secrets.github]
env = "GITHUB_TOKEN"
hosts = ["api.github.com", "*.githubusercontent.com"]

[network.search]
provider = "brave"
api_key_env = "BRAVE_API_KEY"
"#;
    let c = Config::parse(text, Path::new("/etc/tw/config.toml"), None).unwrap();
    let n = &c.network;
    assert_eq!(
        (
            n.limits.connect,
            n.limits.max_response_bytes,
            n.limits.max_redirects
        ),
        (std::time::Duration::from_millis(2500), 65536, 0)
    );
    assert_eq!(
        n.limits.total,
        crate::net::Limits::default().total,
        "what is not given keeps its default"
    );
    assert_eq!(
        n.resolve["wiki.lan"],
        vec![
            "192.168.1.20".parse::<std::net::IpAddr>().unwrap(),
            "fd00::20".parse().unwrap()
        ]
    );
    assert_eq!(
        n.nameservers,
        ["10.0.0.53:53", "10.0.0.54:5353", "[fd00::53]:53"]
            .map(|a| a.parse::<std::net::SocketAddr>().unwrap())
    );
    assert_eq!(n.secrets["github"].env, "GITHUB_TOKEN");
    assert_eq!(
        n.search,
        Some(SearchSettings {
            provider: SearchProvider::Brave,
            url: "https://api.search.brave.com/res/v1/web/search".to_owned(),
            api_key_env: Some("BRAVE_API_KEY".to_owned()),
        })
    );
    let f = "/etc/tw/config.toml";
    let cases = [
        (
            "[network]\ntotal_timeout_ms = 0\n",
            format!("{f}:2:20: network.total_timeout_ms must be between 1 and 600000; got 0"),
        ),
        (
            "[network]\nnameservers = [\"10.0.0.53\", \"dns.lan\"]\n",
            format!(
                "{f}:2:29: network.nameservers: \"dns.lan\" is not an IP address with an \
                 optional port, like \"192.0.2.53\", \"192.0.2.53:5353\" or \"[2001:db8::53]:53\""
            ),
        ),
        (
            "[network.resolve]\n\"wiki.lan\" = [\"not-an-ip\"]\n",
            format!("{f}:2:15: network.resolve.\"wiki.lan\": \"not-an-ip\" is not an IP address"),
        ),
        (
            "[network.secrets.gh]\nenv = \"ghp_abc123 secret\"\nhosts = [\"api.github.com\"]\n",
            format!(
                "{f}:2:7: network.secrets.gh.env: \"ghp_abc123 secret\" is not an environment \
                 variable name (letters, digits and '_'; the variable's name, not its value)"
            ),
        ),
        (
            "[network.secrets.gh]\nenv = \"GH\"\nhosts = [\"*\"]\n",
            format!(
                "{f}:3:9: network.secrets.gh.hosts: \"*\" would send the secret anywhere; name \
                 the hosts that need it"
            ),
        ),
        (
            "[network.secrets.gh]\nenv = \"GH\"\nhosts = []\n",
            format!(
                "{f}:3:9: network.secrets.gh.hosts lists no host: a secret is only ever sent \
                 to the hosts named here"
            ),
        ),
        (
            "[network.search]\nprovider = \"searxng\"\n",
            format!(
                "{f}:2:12: network.search: provider \"searxng\" needs url, the address of the \
                 instance (like \"http://127.0.0.1:8888\")"
            ),
        ),
        (
            "[network.search]\nprovider = \"duckduckgo\"\nurl = \"ftp://x\"\n",
            format!(
                "{f}:3:7: network.search.url must be an http:// or https:// URL, like \
                 \"http://127.0.0.1:8888\"; got \"ftp://x\""
            ),
        ),
        (
            "[network.rate_limits]\n\"api.github.com\" = 0\n",
            format!(
                "{f}:2:20: network.rate_limits.\"api.github.com\": give a number of requests \
                 per minute, or per_minute and/or per_hour, each at least 1 (to keep a host out, \
                 block it)"
            ),
        ),
        (
            "[network.rate_limits]\n\"a b\" = 5\n",
            format!("{f}:2:1: network.rate_limits: \"a b\": "),
        ),
        (
            "[network.search]\nprovider = \"bing\"\n",
            format!(
                "{f}:2:12: unknown variant `bing`, expected one of `searxng`, `brave`, \
                 `duckduckgo`"
            ),
        ),
    ];
    for (text, message) in cases {
        match Config::parse(text, Path::new(f), None) {
            Err(e) => assert!(e.to_string().starts_with(&message), "{e}\n---\n{message}"),
            Ok(c) => panic!("{text} parsed: {c:?}"),
        }
    }
    let c = Config::parse(
        "[network.rate_limits]\n\"api.github.com\" = 60\n\"*.example.org\" = { per_hour = 100 }\n",
        Path::new(f),
        None,
    )
    .unwrap();
    let rates: Vec<_> = c
        .network
        .rate_limits
        .iter()
        .map(|r| (r.hosts.as_str().to_owned(), r.per_minute, r.per_hour))
        .collect();
    assert_eq!(
        rates,
        [
            ("*.example.org".to_owned(), None, Some(100)),
            ("api.github.com".to_owned(), Some(60), None)
        ]
    );
}

#[test]
fn validation_profiles_are_read_with_their_rules_and_schemas() {
    let text = r#"
[validation.profiles.ticket]
schema = "schemas/ticket.json"
min_length = 1
max_length = 10000
encoding = "ascii"
forbid = ["(?i)password\\s*="]
require = ["^TICKET-[0-9]+"]

[validation.profiles.note]
schema = { type = "object", required = ["title"], properties = { title = { type = "string" } } }

[validation.profiles.plain]
encoding = "latin-1"
"#;
    let c = Config::parse(text, Path::new("/etc/tw/config.toml"), None).unwrap();
    let p = &c.validation.profiles;
    assert_eq!(p.keys().collect::<Vec<_>>(), ["note", "plain", "ticket"]);
    let ticket = &p["ticket"];
    assert_eq!(
        ticket.schema,
        Some(SchemaSource::File {
            path: PathBuf::from("/etc/tw/schemas/ticket.json"),
            at: text.find("\"schemas/").unwrap(),
        })
    );
    let r = &ticket.rules;
    assert_eq!(
        (
            r.min_length,
            r.max_length,
            r.encoding,
            r.forbid.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
            r.require.iter().map(|p| p.as_str()).collect::<Vec<_>>()
        ),
        (
            Some(1),
            Some(10000),
            tw_core::content::Encoding::Ascii,
            vec![r"(?i)password\s*="],
            vec!["^TICKET-[0-9]+"]
        )
    );
    match &p["note"].schema {
        Some(SchemaSource::Inline { schema, .. }) => assert_eq!(
            schema.value(),
            &serde_json::json!({"type": "object", "required": ["title"],
                                "properties": {"title": {"type": "string"}}})
        ),
        other => panic!("an inline schema, not {other:?}"),
    }
    assert_eq!(
        (
            p["plain"].schema.is_none(),
            p["plain"].rules.encoding.as_str()
        ),
        (true, "latin-1")
    );
}

#[test]
fn a_malformed_validation_profile_is_refused_at_its_line() {
    let f = "/etc/tw/config.toml";
    let p = "[validation.profiles.ticket]\n";
    let cases = [
        (
            format!("{p}forbid = [\"ok\", \"(?i)password(\"]\n"),
            format!(
                "{f}:2:17: validation.profiles.ticket.forbid[1]: \"(?i)password(\": not a \
                 regular expression: unclosed group"
            ),
        ),
        (
            format!("{p}require = [\"\"]\n"),
            format!(
                "{f}:2:12: validation.profiles.ticket.require[0]: \"\": an empty pattern \
                 matches every text; leave it out"
            ),
        ),
        (
            format!("{p}min_length = 10\nmax_length = 5\n"),
            format!(
                "{f}:3:14: validation.profiles.ticket: max_length 5 is less than min_length \
                 10: no text could pass"
            ),
        ),
        (
            format!("{p}encoding = \"ebcdic\"\n"),
            format!(
                "{f}:2:12: validation.profiles.ticket.encoding: unknown encoding \"ebcdic\": \
                 expected one of utf-8, ascii, latin-1"
            ),
        ),
        (
            format!("{p}encoding = \"ascii\"\nmax_lenght = 5\n"),
            format!(
                "{f}:3:1: unknown field `max_lenght`, expected one of `schema`, `min_length`, \
                 `max_length`, `encoding`, `forbid`, `require`"
            ),
        ),
        (
            format!("{p}min_length = -1\n"),
            format!("{f}:2:14: invalid value: integer `-1`, expected u64"),
        ),
        (
            format!(
                "{p}schema = {{ type = \"object\", properties = {{ a = {{ type = \"strnig\" }} }} }}\n"
            ),
            format!(
                "{f}:2:10: validation.profiles.ticket.schema: invalid JSON Schema: at \
                 /properties/a/type: \"strnig\" is not valid under any of the schemas listed in \
                 the 'anyOf' keyword"
            ),
        ),
        (
            format!("{p}schema = 3\n"),
            format!(
                "{f}:2:10: validation.profiles.ticket.schema: give the path of a JSON Schema \
                 file (\"schemas/ticket.json\") or the schema as a table ({{ type = \"object\", \
                 ... }})"
            ),
        ),
        (
            format!("{p}\n"),
            format!(
                "{f}:1:22: validation.profiles.ticket has no rule, so every content would \
                 pass: give schema, min_length, max_length, encoding, forbid or require"
            ),
        ),
        (
            "[validation.profiles.\"Ticket Form\"]\nmin_length = 1\n".to_owned(),
            format!(
                "{f}:1:22: validation.profiles: \"Ticket Form\" is not a profile name (1 to 64 \
                 lowercase letters, digits, '_' and '-', starting with a letter)"
            ),
        ),
        (
            "[validation]\nprofile = {}\n".to_owned(),
            format!("{f}:2:1: unknown field `profile`, expected `profiles`"),
        ),
    ];
    for (text, want) in cases {
        check(&text, Err(&want));
    }
}

/// Schema files are read when the runtime opens, through the reader it passes; what cannot be
/// used is refused at the line that names it, with the profile and, for a file that is not
/// JSON, the place in that file.
#[test]
fn schema_files_are_read_and_compiled_with_errors_at_the_line_naming_them() {
    let text = "[validation.profiles.ticket]\nmax_length = 100\nschema = \"schemas/ticket.json\"\n";
    let c = Config::parse(text, Path::new("/etc/tw/config.toml"), None).unwrap();
    let with = |file: Option<&str>| {
        c.content_profiles(|path| {
            assert_eq!(path, Path::new("/etc/tw/schemas/ticket.json"));
            file.map(str::to_owned).ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory")
            })
        })
    };
    let profiles = with(Some(r#"{"type": "object", "required": ["id"]}"#)).unwrap();
    assert_eq!(
        profiles["ticket"].schema().map(|s| s.value().clone()),
        Some(serde_json::json!({"type": "object", "required": ["id"]}))
    );
    assert_eq!(profiles["ticket"].rules().max_length, Some(100));
    let errors = [
        with(None),
        with(Some(
            "{\n  \"type\": \"object\",\n  \"required\": [\"id\",]\n}",
        )),
        with(Some(r#"{"type": "objekt"}"#)),
        with(Some(r#"{"$ref": "other.json"}"#)),
    ]
    .map(|r| r.map(|_| ()).map_err(|e| e.to_string()));
    let at = "/etc/tw/config.toml:3:10: validation.profiles.ticket.schema: ";
    let file = "/etc/tw/schemas/ticket.json";
    assert_eq!(
        errors[..3],
        [
            Err(format!("{at}cannot read {file}: No such file or directory")),
            Err(format!("{at}{file}:3:21: not JSON: trailing comma")),
            Err(format!(
                "{at}{file}: invalid JSON Schema: at /type: \"objekt\" is not valid under any of \
                 the schemas listed in the 'anyOf' keyword"
            )),
        ]
    );
    // A reference to another file is not followed (schemas are compiled offline).
    let unresolved = errors[3].clone().unwrap_err();
    assert!(
        unresolved.starts_with(&format!("{at}{file}: JSON Schema cannot be compiled: ")),
        "{unresolved}"
    );
    // Without profiles nothing is read.
    let none = Config::default()
        .content_profiles(|_| panic!("nothing to read"))
        .unwrap();
    assert!(none.is_empty());
}

#[test]
fn the_watchdog_section_checks_its_levels_and_says_where() {
    let at = Path::new("/etc/tw/config.toml");
    let c = Config::parse(
        "[watchdog]\ndisk_free_min_mb = 100\nauto_recover = true\n",
        at,
        None,
    )
    .unwrap();
    assert_eq!(
        (c.watchdog.disk_free_min_mb, c.watchdog.disk_free_resume_mb),
        (100, 200),
        "the resume level defaults to twice the floor"
    );
    assert!(c.watchdog.auto_recover && c.watchdog.enabled);
    assert_eq!(Config::default().watchdog, WatchdogSettings::default());
    let cases = [
        (
            "[watchdog]\ndisk_free_min_mb = 100\ndisk_free_resume_mb = 50\n",
            "/etc/tw/config.toml:3:23: watchdog.disk_free_resume_mb (50) must be more than \
             watchdog.disk_free_min_mb (100)",
        ),
        (
            "[watchdog]\ninterval_ms = 5\n",
            "/etc/tw/config.toml:2:15: watchdog.interval_ms: from 100",
        ),
        (
            "[watchdog]\nmemory_pressure_max = 120.0\n",
            "/etc/tw/config.toml:2:23: watchdog.memory_pressure_max and _resume are percentages",
        ),
        (
            "[watchdog]\nmemory_pressure_max = 30.0\nmemory_pressure_resume = 30.0\n",
            "/etc/tw/config.toml:3:26: watchdog.memory_pressure_resume (30) must be less than",
        ),
        ("[watchdog]\nfree_disk = 1\n", "/etc/tw/config.toml:2:1: "),
    ];
    for (text, want) in cases {
        let got = Config::parse(text, at, None).unwrap_err().to_string();
        assert!(got.starts_with(want), "{text}\ngot:  {got}\nwant: {want}");
    }
}

#[test]
fn the_telemetry_section_is_off_by_default_and_says_where_it_is_wrong() {
    let at = Path::new("/etc/tw/config.toml");
    assert_eq!(Config::default().telemetry.otlp_endpoint, None);
    let c = Config::parse(
        "[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318/\"\nservice_name = \"edge\"\n\
         [telemetry.headers]\nX-Key = \"env:OTLP_KEY\"\nx-tenant = \"blue\"\n",
        at,
        None,
    )
    .unwrap();
    let t = &c.telemetry;
    assert_eq!(t.otlp_endpoint.as_deref(), Some("http://127.0.0.1:4318"));
    assert_eq!(t.service_name, "edge");
    assert_eq!(
        t.headers.get("x-key"),
        Some(&HeaderValue::Env("OTLP_KEY".to_owned()))
    );
    assert_eq!(
        t.headers.get("x-tenant"),
        Some(&HeaderValue::Literal("blue".to_owned()))
    );
    let cases = [
        (
            "[telemetry]\notlp_endpoint = \"collector:4318\"\n",
            "/etc/tw/config.toml:2:17: telemetry.otlp_endpoint \"collector:4318\": an http or https",
        ),
        (
            "[telemetry]\notlp_endpoint = \"not a url\"\n",
            "/etc/tw/config.toml:2:17: telemetry.otlp_endpoint \"not a url\" is not a URL",
        ),
        (
            "[telemetry]\nmetrics_interval_ms = 10\n",
            "/etc/tw/config.toml:2:23: telemetry.metrics_interval_ms: from 1000 to 3600000",
        ),
        (
            "[telemetry.headers]\n\"bad header\" = \"x\"\n",
            "/etc/tw/config.toml:2:1: telemetry.headers: \"bad header\" is not a header name",
        ),
        (
            "[telemetry.headers]\nkey = \"env:\"\n",
            "/etc/tw/config.toml:2:7: telemetry.headers.key: `env:` names no variable",
        ),
        (
            "[telemetry]\nendpoint = \"x\"\n",
            "/etc/tw/config.toml:2:1: ",
        ),
    ];
    for (text, want) in cases {
        let got = Config::parse(text, at, None).unwrap_err().to_string();
        assert!(got.starts_with(want), "{text}\ngot:  {got}\nwant: {want}");
    }
}
