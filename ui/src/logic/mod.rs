//! The UI's pure logic, kept free of the DOM and of IPC so that `cargo test -p tw-ui` checks it on
//! the host: the views only wire these functions to signals.

pub(crate) mod chains;
pub(crate) mod chart;
pub(crate) mod cursor;
pub(crate) mod filters;
pub(crate) mod frames;
pub(crate) mod json_view;
pub(crate) mod live;
pub(crate) mod nav;
pub(crate) mod schema;
pub(crate) mod skills;
pub(crate) mod time;
pub(crate) mod tone;
pub(crate) mod tool_form;
pub(crate) mod try_form;
