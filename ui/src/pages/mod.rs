//! The console's seven pages, one module each (the confirmation dialog lives with its page; the
//! custom-tool form and the "try it" card with the tools page).

pub(crate) mod audit;
pub(crate) mod chains;
pub(crate) mod confirmations;
pub(crate) mod grants;
pub(crate) mod live;
pub(crate) mod settings;
pub(crate) mod skills;
pub(crate) mod tool_form;
pub(crate) mod tools;
pub(crate) mod try_it;
pub(crate) mod usage;
