//! The console's five pages, one module each (the confirmation dialog lives with its page).

pub(crate) mod audit;
pub(crate) mod confirmations;
pub(crate) mod live;
pub(crate) mod settings;
pub(crate) mod tools;
