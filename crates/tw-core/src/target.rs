//! Hosts, URLs and paths in tool arguments, normalized for policy matching (work in progress).
