//! Integration suites, one module per capability.

mod architecture;
mod audit;
mod batch;
mod browser;
mod chains;
mod custom_tools;
mod egress;
mod email;
mod escapes;
mod holes;
mod knowledge;
mod live;
mod mcp;
mod pipes;
mod policy;
mod sandbox;
mod skill_ops;
mod skills;
mod ssrf;
mod statuses;
mod support;
mod telemetry;
mod text;
mod tool_switches;
mod validation;
mod watchdog;
