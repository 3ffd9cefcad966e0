//! The one integration test binary (one link step instead of one per file). Each module in suite/
//! covers one capability end to end through the real `toolwarden` binary.

mod suite;
